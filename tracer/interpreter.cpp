#include "tracer/interpreter.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "tessel/core/errors.hpp"
#include "tracer/control_rules.hpp"
#include "tracer/convert.hpp"
#include "tracer/rewrite.hpp"

namespace tessel {

namespace {

// A tuple-valued op's elements from its packed reference result (rule_util::pack_tuple).
std::vector<HostArray> unpack_tuple(const HostArray& packed, const Aval& tuple);

bool has_narrow(const Aval& a) {
  if (a.tuple) return std::any_of(a.elements.begin(), a.elements.end(), has_narrow);
  return is_narrow_float(a.dtype);
}

Aval widened(Aval a) {
  for (auto& e : a.elements) e = widened(e);
  if (is_narrow_float(a.dtype)) a.dtype = DType::float64;
  return a;
}

HostArray converted(const HostArray& x, DType to) {
  HostArray h;
  h.dtype = to;
  h.shape = x.shape;
  h.bytes.resize(std::size_t(numel(x.shape)) * dtype_size(to));
  convert_elements(x.dtype, x.bytes.data(), to, h.bytes.data(), numel(x.shape));
  return h;
}

// The ops that see a narrow float's bits, not its value: those that move
// data keep every bit, NaN payloads included, as XLA's do.
bool sees_bits(Op op) {
  switch (op_family(op)) {
    case OpFamily::Shape: case OpFamily::Select: case OpFamily::Annotation: case OpFamily::Tuple: return true;
    default: break;
  }
  return op == Op::parameter || op == Op::constant || op == Op::convert || op == Op::bitcast_convert ||
         op == Op::debug_callback || op == Op::all_gather || op == Op::all_to_all || op == Op::collective_permute;
}

}  // namespace

// Every op runs here. An op on narrow floats (bfloat16, float16, float8_*)
// runs on their values in float64 and its narrow results are rounded once,
// to nearest even: exact arithmetic rounded once for +, -, *, /, sqrt
// (float64 holds the exact result's rounding), and the reference kernels
// never see a narrow float (visit_wide_dtype).
void eval_rule(Op op, const Attrs& a, const Aval& aval, const std::vector<const HostArray*>& in, HostArray& out) {
  bool narrow = has_narrow(aval);
  for (auto* x : in) narrow = narrow || (x && is_narrow_float(x->dtype));
  if (!narrow || sees_bits(op)) {
    rules(op).eval(in, a, aval, out);
    return;
  }
  std::vector<HostArray> wide;
  wide.reserve(in.size());
  std::vector<const HostArray*> args;
  for (auto* x : in) {
    if (x && is_narrow_float(x->dtype)) {
      wide.push_back(converted(*x, DType::float64));
      args.push_back(&wide.back());
    } else {
      args.push_back(x);
    }
  }
  const Aval wa = widened(aval);
  HostArray w;
  rules(op).eval(args, a, wa, w);
  if (!aval.tuple) {
    out = is_narrow_float(aval.dtype) ? converted(w, aval.dtype) : std::move(w);
    return;
  }
  std::vector<HostArray> parts = unpack_tuple(w, wa);
  std::vector<const HostArray*> ptrs;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (is_narrow_float(aval.elements[k].dtype)) parts[k] = converted(parts[k], aval.elements[k].dtype);
    ptrs.push_back(&parts[k]);
  }
  out = HostArray{};
  rule_util::pack_tuple(out, ptrs);
}

HostArray host_eval(Op op, const Attrs& a, const Aval& out_aval, const std::vector<const HostArray*>& in) {
  HostArray out;
  eval_rule(op, a, out_aval, in, out);
  return out;
}

namespace {

// A node's value: one array, or a tuple's elements.
using Value = InterpValue;  // tracer/control_rules.hpp

std::vector<Value> run(const Graph& g, std::vector<Value> args);

// A tuple-valued op's elements from its packed reference result (rule_util::pack_tuple).
std::vector<HostArray> unpack_tuple(const HostArray& packed, const Aval& tuple) {
  std::vector<HostArray> r;
  std::size_t at = 0;
  for (auto& e : tuple.elements) {
    HostArray h;
    rule_util::allocate(h, e);
    TESSEL_CHECK_INTERNAL(at + h.bytes.size() <= packed.bytes.size(), "a packed tuple result is too short");
    if (!h.bytes.empty()) std::memcpy(h.bytes.data(), packed.bytes.data() + at, h.bytes.size());
    at += h.bytes.size();
    r.push_back(std::move(h));
  }
  return r;
}

Aval aval_of(const HostArray& h) { return Aval{h.dtype, h.shape, false}; }

HostArray slice_box(const HostArray& x, const Box& b) {
  Aval o = aval_of(x);
  o.shape = b.extent();
  return host_eval(Op::slice, attr::Slice{b.start, b.stop, std::vector<std::int64_t>(b.start.size(), 1)}, o, {&x});
}

}  // namespace

HostArray host_concat(const std::vector<HostArray>& xs, std::int64_t dim) {
  std::vector<const HostArray*> in;
  Aval o = aval_of(xs.at(0));
  o.shape[dim] = 0;
  for (auto& x : xs) in.push_back(&x), o.shape[dim] += x.shape[dim];
  if (xs.size() == 1) return xs[0];
  return host_eval(Op::concatenate, attr::Dimension{dim}, o, in);
}

HostArray host_chunk(const HostArray& x, std::int64_t dim, std::int64_t k, std::int64_t n) {
  Box b{std::vector<std::int64_t>(x.shape.size(), 0), x.shape};
  const std::int64_t len = x.shape[dim] / n;
  b.start[dim] = k * len;
  b.stop[dim] = (k + 1) * len;
  return slice_box(x, b);
}

namespace {


// The devices of `axes`' group that holds pos, in group order.
std::vector<std::int64_t> group_of(const DeviceMesh& mesh, const std::vector<int>& axes, std::int64_t pos) {
  for (auto& g : collective_groups(mesh, axes))
    if (std::find(g.begin(), g.end(), pos) != g.end()) return g;
  throw InternalError(detail::cat("device position ", pos, " in no group of ", mesh.str()));
}

// The whole array of aval g from the blocks of `members`, each placed where
// `spec` puts it (blocks over an axis the spec leaves out are equal: the
// first member's is kept).
HostArray assemble(const AxisSharding& spec, const Aval& g, const std::vector<Value>& blocks, size_t element,
                   const std::vector<std::int64_t>& members) {
  HostArray whole;
  whole.dtype = g.dtype;
  whole.shape = g.shape;
  whole.bytes.assign(std::size_t(numel(g.shape)) * dtype_size(g.dtype), 0);
  const std::size_t es = dtype_size(g.dtype);
  const auto gst = row_major_strides(g.shape);
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    const Box box = spec.shard_box(g.shape, *it);
    const HostArray& blk = blocks[size_t(*it)].at(element);
    const auto bst = row_major_strides(blk.shape);
    const std::int64_t count = numel(blk.shape);
    for (std::int64_t f = 0; f < count; ++f) {
      std::int64_t dst = 0;
      for (size_t d = 0; d < blk.shape.size(); ++d) dst += ((f / bst[d]) % blk.shape[d] + box.start[d]) * gst[d];
      std::memcpy(whole.bytes.data() + dst * es, blk.bytes.data() + f * es, es);
    }
  }
  return whole;
}

std::vector<PerDevice> run_spmd(const Graph& body, const DeviceMesh& mesh, std::vector<PerDevice> params);

// A shard_map on every device at once: each device's block of each operand
// (its value at that device, split by the in_spec), the body run SPMD, and
// each device's results assembled from the blocks of its group over the
// shard_map's manual axes. Devices differing in other axes (automatic ones,
// or those of an enclosing shard_map) run the body apart.
PerDevice run_shard_map_spmd(const Node& n, const std::vector<const PerDevice*>& in) {
  const auto& sm = n.attr<attr::ShardMap>();
  const DeviceMesh& mesh = *sm.mesh;
  const std::int64_t P = mesh.size();
  const Graph& body = *sm.body;
  std::vector<PerDevice> params;
  for (size_t k = 0; k < body.params.size(); ++k) {
    PerDevice per;
    for (std::int64_t pos = 0; pos < P; ++pos) {
      const HostArray& x = (*in[k])[size_t(pos)].at(0);
      per.push_back({slice_box(x, sm.in_specs[k].shard_box(x.shape, pos))});
    }
    params.push_back(std::move(per));
  }
  auto outs = run_spmd(body, mesh, std::move(params));
  PerDevice result(static_cast<size_t>(P));
  for (std::int64_t pos = 0; pos < P; ++pos) {
    const auto members = group_of(mesh, sm.manual, pos);
    for (size_t k = 0; k < body.outputs.size(); ++k) {
      const Aval& g = n.aval.tuple ? n.aval.elements[k] : n.aval;
      result[size_t(pos)].push_back(assemble(sm.out_specs[k], g, outs[k], 0, members));
    }
  }
  return result;
}

// The body of a shard_map on every device's values, node by node across all
// devices at once, so that each collective sees every member of its groups.
// The reference for the partitioner and the runtime's collectives.
std::vector<PerDevice> run_spmd(const Graph& body, const DeviceMesh& mesh, std::vector<PerDevice> params) {
  const std::int64_t P = mesh.size();
  std::unordered_map<const Node*, PerDevice> v;
  for (size_t k = 0; k < body.params.size(); ++k) v[body.params[k].get()] = std::move(params[k]);
  for (auto& b : body.topo_order()) {
    if (b->op == Op::parameter) continue;
    if (b->op == Op::shard_map) {
      std::vector<const PerDevice*> in;
      for (auto& x : b->in) in.push_back(&v.at(x.get()));
      v[b.get()] = run_shard_map_spmd(*b, in);
      continue;
    }
    if (is_control_flow(b->op)) {
      std::vector<const PerDevice*> in;
      for (auto& x : b->in) in.push_back(&v.at(x.get()));
      v[b.get()] = control_rules(b->op).run(*b, in, P, [&](const Graph& g, std::vector<PerDevice> args) {
        return run_spmd(g, mesh, std::move(args));
      });
      continue;
    }
    PerDevice pv(static_cast<size_t>(P));
    if (b->op == Op::tuple || b->op == Op::get_tuple_element) {
      for (std::int64_t pos = 0; pos < P; ++pos) {
        if (b->op == Op::tuple) {
          for (auto& x : b->in) pv[size_t(pos)].push_back(v.at(x.get())[size_t(pos)].at(0));
        } else {
          pv[size_t(pos)].push_back(
              v.at(b->in[0].get())[size_t(pos)].at(size_t(b->attr<attr::TupleIndex>().index)));
        }
      }
      v[b.get()] = std::move(pv);
      continue;
    }
    std::vector<HostArray> out(static_cast<size_t>(P));
    auto arg = [&](std::int64_t pos, size_t k) -> const HostArray& { return v.at(b->in[k].get())[size_t(pos)].at(0); };
    if (const GroupEval eval_group = group_eval(b->op)) {
      // Collectives and axis_index: their rule over each group's members
      // (the whole mesh, in position order, for collective_permute).
      const CollectiveAxes ca = collective_axes(*b);
      std::vector<std::vector<std::int64_t>> groups;
      if (ca.axes) {
        groups = collective_groups(mesh, *ca.axes);
      } else {
        groups.emplace_back();
        for (std::int64_t pos = 0; pos < P; ++pos) groups[0].push_back(pos);
      }
      for (auto& group : groups) {
        std::vector<const HostArray*> members;
        for (auto pos : group) members.push_back(b->in.empty() ? nullptr : &arg(pos, 0));
        std::vector<HostArray> results(group.size());
        eval_group(*b, members, results);
        for (size_t r = 0; r < group.size(); ++r) out[size_t(group[r])] = std::move(results[r]);
      }
    } else {
      if (op_family(b->op) == OpFamily::Region || op_family(b->op) == OpFamily::Tuple || b->aval.tuple)
        throw NotImplementedError(detail::cat(op_name(b->op), " inside a shard_map body"));
      for (std::int64_t pos = 0; pos < P; ++pos) {
        std::vector<const HostArray*> ins;
        for (size_t k = 0; k < b->in.size(); ++k) ins.push_back(&arg(pos, k));
        out[size_t(pos)] = host_eval(b->op, b->attrs, b->aval, ins);
      }
    }
    for (std::int64_t pos = 0; pos < P; ++pos) pv[size_t(pos)].push_back(std::move(out[size_t(pos)]));
    v[b.get()] = std::move(pv);
  }
  std::vector<PerDevice> outs;
  for (auto& o : body.outputs) outs.push_back(v.at(o.get()));
  return outs;
}

// A shard_map outside any other: every device's operands are the whole
// arrays; its results as the first device's group assembles them (every
// group's are equal).
Value run_shard_map(const Node& n, const std::vector<const Value*>& in) {
  const std::int64_t P = n.attr<attr::ShardMap>().mesh->size();
  std::vector<PerDevice> per;
  std::vector<const PerDevice*> ptrs;
  for (auto* x : in) per.push_back(PerDevice(static_cast<size_t>(P), *x));
  for (auto& p : per) ptrs.push_back(&p);
  return run_shard_map_spmd(n, ptrs)[0];
}

std::vector<Value> run(const Graph& g, std::vector<Value> args) {
  std::unordered_map<const Node*, Value> values;
  for (size_t i = 0; i < args.size(); ++i) values[g.params[i].get()] = std::move(args[i]);
  for (auto& n : g.topo_order()) {
    if (n->op == Op::parameter) continue;
    std::vector<const Value*> in;
    for (auto& x : n->in) in.push_back(&values.at(x.get()));
    Value out;
    switch (op_family(n->op)) {
      case OpFamily::Tuple:
        // Structural: a tuple holds its operands; an element is one of them.
        if (n->op == Op::tuple) {
          for (auto* v : in) out.push_back(v->at(0));
        } else {
          out.push_back(in[0]->at(size_t(n->attr<attr::TupleIndex>().index)));
        }
        break;
      case OpFamily::Region: {
        if (n->op == Op::shard_map) {
          out = run_shard_map(*n, in);
          break;
        }
        if (n->op == Op::custom_lin)
          throw InternalError("custom-lin reached the interpreter: reverse mode transposes it to its bwd");
        if (n->op != Op::call && !is_custom_call(n->op)) {
          // Control flow: one position.
          std::vector<PerDevice> per;
          std::vector<const PerDevice*> ptrs;
          for (auto* v : in) per.push_back(PerDevice{*v});
          for (auto& p : per) ptrs.push_back(&p);
          out = control_rules(n->op).run(*n, ptrs, 1, [](const Graph& g, std::vector<PerDevice> args) {
            std::vector<Value> a;
            for (auto& x : args) a.push_back(std::move(x.at(0)));
            std::vector<PerDevice> r;
            for (auto& o : run(g, std::move(a))) r.push_back(PerDevice{std::move(o)});
            return r;
          })[0];
          break;
        }
        // call: its body on the operands, by this same interpreter (a custom call: its fun).
        std::vector<Value> sub;
        for (auto* v : in) sub.push_back(*v);
        for (auto& r : run(*n->regions().at(0), std::move(sub))) out.push_back(std::move(r.at(0)));
        break;
      }
      default: {
        std::vector<const HostArray*> arrays;
        for (auto* v : in) arrays.push_back(&v->at(0));
        out.emplace_back();
        eval_rule(n->op, n->attrs, n->aval, arrays, out[0]);
        if (n->aval.tuple) out = unpack_tuple(out[0], n->aval);
      }
    }
    values[n.get()] = std::move(out);
  }
  std::vector<Value> outs;
  for (auto& o : g.outputs) outs.push_back(values.at(o.get()));
  return outs;
}

}  // namespace

std::vector<HostArray> interpret(const Graph& g, const std::vector<HostArray>& args) {
  if (args.size() != g.params.size())
    throw InternalError(detail::cat("interpret: ", g.params.size(), " parameters, ", args.size(), " arguments"));
  std::vector<Value> in;
  for (size_t i = 0; i < args.size(); ++i) {
    const Aval& a = g.params[i]->aval;
    if (args[i].dtype != a.dtype || args[i].shape != a.shape)
      throw InternalError(detail::cat("interpret: argument ", i, " is ", aval_str(args[i].dtype, args[i].shape),
                                      ", the parameter is ", a.str()));
    in.push_back({args[i]});
  }
  std::vector<HostArray> outs;
  // Custom calls run as their fun (in shard_map bodies too).
  const bool custom = has_calls(g);
  const Graph flat = custom ? inline_custom_calls(g) : Graph{};
  for (auto& v : run(custom ? flat : g, std::move(in))) {
    if (v.size() != 1) throw InternalError("interpret: a graph output is a tuple");
    outs.push_back(std::move(v[0]));
  }
  return outs;
}

HostArray host_array(DType dtype, const Shape& shape, const void* data) {
  HostArray h;
  h.dtype = dtype;
  h.shape = shape;
  h.bytes.resize(std::size_t(numel(shape)) * dtype_size(dtype));
  if (!h.bytes.empty()) std::memcpy(h.bytes.data(), data, h.bytes.size());
  return h;
}

}  // namespace tessel
