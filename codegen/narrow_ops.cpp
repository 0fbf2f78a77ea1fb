#include "codegen/narrow_ops.hpp"

#include "codegen/conv.hpp"

#include "tessel/core/errors.hpp"
#include "tracer/build.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

bool narrow(const Aval& a) {
  if (a.tuple) {
    for (auto& e : a.elements)
      if (narrow(e)) return true;
    return false;
  }
  return is_narrow_float(a.dtype);
}

Aval widened(Aval a) {
  for (auto& e : a.elements) e = widened(e);
  a.dtype = compute_dtype(a.dtype);
  return a;
}

// The families computed natively on narrow floats: elementwise math (in
// float32 registers, rounded per op), data movement, annotations, tuples,
// control flow (their bodies are rewritten on their own) and collectives.
bool native(Op op) {
  switch (op_family(op)) {
    case OpFamily::Reduce: case OpFamily::Dot: return false;
    case OpFamily::Library: return op == Op::debug_callback || op == Op::host_call;  // callbacks see the narrow values
    default: return true;
  }
}

bool rewritten(const Node& n) {
  if (native(n.op)) return false;
  if (narrow(n.aval)) return true;
  for (auto& x : n.in)
    if (narrow(x->aval)) return true;
  return false;
}

}  // namespace

// A float32 dot of converted bfloat16 operands.
bool mixed_dot(const Node& n) {
  if (n.op != Op::dot_general || n.dtype() != DType::float32) return false;
  for (auto& x : n.in)
    if (!(x->op == Op::convert && x->in[0]->dtype() == DType::bfloat16)) return false;
  return true;
}

namespace {

bool bf16_convert(const Node& x) { return x.op == Op::convert && x.in[0]->dtype() == DType::bfloat16; }

// A float32 convolution of converted bfloat16 operands (or reversals of them:
// a gradient's kernel) that oneDNN runs in bfloat16 on this CPU
// (codegen/conv.hpp).
bool mixed_conv(const Node& n) {
  if (n.op != Op::conv) return false;
  for (auto& x : n.in)
    if (!bf16_convert(*x) && !(x->op == Op::rev && bf16_convert(*x->in[0]))) return false;
  return conv_in_bfloat16(n);
}

bool is_byte_int(DType t) { return t == DType::int8 || t == DType::uint8; }

// An integer dot of at most 32 bits whose operands are 8-bit integers, or
// converts of them to integers at least as wide as the result: its int32
// product of the bytes, wrapped to the result's width w, is the result. (An
// integer convert keeps the value mod 2^(its width) >= 2^w, and sums of
// products mod 2^w depend only on the factors mod 2^w.)
bool byte_dot(const Node& n) {
  if (n.op != Op::dot_general || n.aval.tuple || !is_integral(n.dtype()) || dtype_size(n.dtype()) > 4) return false;
  for (auto& x : n.in) {
    const bool widened_byte = x->op == Op::convert && is_byte_int(x->in[0]->dtype()) && is_integral(x->dtype()) &&
                              dtype_size(x->dtype()) >= dtype_size(n.dtype());
    if (!is_byte_int(x->dtype()) && !widened_byte) return false;
  }
  return true;
}

NodeRef byte_source(const NodeRef& x) { return is_byte_int(x->dtype()) ? x : x->in[0]; }

}  // namespace

bool has_narrow_compute(const Graph& g) {
  bool any = false;
  for_each_graph(g, [&](const Graph& r) {
    for (auto& n : r.topo_order()) any = any || rewritten(*n) || mixed_dot(*n) || byte_dot(*n) || mixed_conv(*n);
  });
  return any;
}

Graph widen_narrow_compute(const Graph& g) {
  NodeTable t;
  std::vector<NodeRef> params;
  for (auto& p : g.params) params.push_back(t.make(p->op, {}, p->aval, p->attrs));
  auto m = rewrite(g, t, params, [&](const Node& n, const std::vector<NodeRef>& ops) -> NodeRef {
    if (n.op == Op::get_tuple_element) return build::get_tuple_element(t, ops[0], n.attr<attr::TupleIndex>().index);
    if (n.op == Op::dot_general) {
      // bfloat16 operands (or float32 converts of them, as a float32
      // preferred_element_type makes) multiply as bfloat16 into float32:
      // the mixed form the GEMM runs natively (codegen/dot.cpp).
      auto source = [](const NodeRef& x) -> NodeRef {
        if (x->dtype() == DType::bfloat16) return x;
        if (x->op == Op::convert && x->dtype() == DType::float32 && x->in[0]->dtype() == DType::bfloat16) return x->in[0];
        return nullptr;
      };
      NodeRef a = source(ops[0]), b = source(ops[1]);
      if (a && b && (n.dtype() == DType::float32 || n.dtype() == DType::bfloat16)) {
        NodeRef w = t.make(Op::dot_general, {a, b}, Aval{DType::float32, n.shape(), false}, n.attrs);
        return n.dtype() == DType::float32 ? w : build::convert(t, w, n.dtype());
      }
    }
    if (mixed_conv(n)) {
      // ts::lax convolves bfloat16 as float32 converts (tracer/rules_conv.cpp):
      // oneDNN takes the bfloat16 sources and accumulates in float32, as the
      // float32 convolution of the converts does (each product is exact).
      auto source = [&](const NodeRef& x) {
        if (x->op == Op::convert) return x->in[0];
        return build::rev(t, x->in[0]->in[0], x->attr<attr::Dimensions>().dims);  // reversed in bfloat16
      };
      return t.make(Op::conv, {source(ops[0]), source(ops[1])}, n.aval, n.attrs);
    }
    if (byte_dot(n)) {
      // 8-bit integer operands multiply into int32: the mixed form the GEMM
      // runs on VNNI's byte dot products (codegen/dot.cpp).
      NodeRef w = t.make(Op::dot_general, {byte_source(ops[0]), byte_source(ops[1])},
                         Aval{DType::int32, n.shape(), false}, n.attrs);
      return n.dtype() == DType::int32 ? w : build::convert(t, w, n.dtype());
    }
    if (!rewritten(n)) return build::with_operands(t, n, ops);
    std::vector<NodeRef> wide;
    for (auto& x : ops) wide.push_back(is_narrow_float(x->dtype()) && !x->aval.tuple ? build::convert(t, x, DType::float32) : x);
    NodeRef w = t.make(n.op, wide, widened(n.aval), n.attrs);
    if (!n.aval.tuple) return is_narrow_float(n.dtype()) ? build::convert(t, w, n.dtype()) : w;
    // Several results: a tuple of each one converted back, which the
    // get_tuple_elements above fold away.
    std::vector<NodeRef> parts;
    for (size_t k = 0; k < n.aval.elements.size(); ++k) {
      NodeRef e = build::get_tuple_element(t, w, std::int64_t(k));
      const DType d = n.aval.elements[k].dtype;
      parts.push_back(is_narrow_float(d) ? build::convert(t, e, d) : e);
    }
    return build::tuple(t, parts);
  });
  Graph out;
  out.name = g.name;
  out.params = params;
  for (auto& o : g.outputs) out.outputs.push_back(m.at(o.get()));
  for (auto& e : g.effects) out.effects.push_back(m.at(e.get()));
  return out;
}

}  // namespace tessel::codegen
