#include "tracer/rules.hpp"

#include <sstream>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

namespace {
// The table's entries take any node's attributes; each op's rules take its
// own struct (checked here, once).
template <Op op>
Aval infer_entry(const std::vector<Aval>& in, const Attrs& p, const Aval& declared) {
  return Rule<op>::infer(in, p.as<typename Rule<op>::A>(), declared);
}
template <Op op>
void eval_entry(const std::vector<const HostArray*>& in, const Attrs& p, const Aval& out_aval, HostArray& out) {
  Rule<op>::eval(in, p.as<typename Rule<op>::A>(), out_aval, out);
}

const OpRules kRules[] = {
#define TESSEL_X(e, text, family, cost_class, attrs)                                                  \
  {&infer_entry<Op::e>, &eval_entry<Op::e>, &Rule<Op::e>::factors, &Rule<Op::e>::jvp, \
   &Rule<Op::e>::transpose, &Rule<Op::e>::local, &Rule<Op::e>::batch, &Rule<Op::e>::expand_complex, \
   &Rule<Op::e>::cost},
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kNumOps);

const char* kOpNames[] = {
#define TESSEL_X(e, text, family, cost, attrs) text,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

const OpFamily kOpFamilies[] = {
#define TESSEL_X(e, text, family, cost, attrs) OpFamily::family,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

const OpCost kOpCosts[] = {
#define TESSEL_X(e, text, family, cost, attrs) OpCost::cost,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
}  // namespace

const OpRules& rules(Op op) { return kRules[int(op)]; }
OpCost op_cost(Op op) { return kOpCosts[int(op)]; }
const char* op_name(Op op) { return kOpNames[int(op)]; }
OpFamily op_family(Op op) { return kOpFamilies[int(op)]; }

bool is_commutative(Op op) {
  return op == Op::add || op == Op::mul || op == Op::max || op == Op::min || op == Op::and_ || op == Op::or_ ||
         op == Op::xor_ || op == Op::eq || op == Op::ne;
}

namespace rule_util {

std::string avals_str(const std::vector<Aval>& in) {
  std::ostringstream os;
  // As JAX names them in messages: float32[4,8].
  for (size_t i = 0; i < in.size(); ++i)
    os << (i ? (i + 1 == in.size() ? " and " : ", ") : "") << aval_str(in[i].dtype, in[i].shape)
       << (in[i].weak_type ? "{weak}" : "");
  return os.str();
}

std::string ints(const std::vector<std::int64_t>& v) {
  std::ostringstream os;
  os << '{';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << '}';
  return os.str();
}

void expect_arity(Op op, const std::vector<Aval>& in, size_t n) {
  if (in.size() != n)
    throw InternalError(detail::cat(op_name(op), " takes ", n, " operands, got ", in.size()));
}

void allocate(HostArray& out, const Aval& aval) {
  out.dtype = aval.dtype;
  out.shape = aval.shape;
  out.bytes.assign(std::size_t(numel(aval.shape)) * dtype_size(aval.dtype), 0);
}

void pack_tuple(HostArray& out, const std::vector<const HostArray*>& elements) {
  out.dtype = elements.at(0)->dtype;
  out.shape = {};
  out.bytes.clear();
  for (auto* e : elements) out.bytes.insert(out.bytes.end(), e->bytes.begin(), e->bytes.end());
}

FactorRule elementwise_factors(const Node& n) {
  FactorRule r;
  for (auto d : n.shape()) r.add_factor(d);
  for (auto& x : n.in) {
    std::vector<std::vector<int>> dims;
    // Scalar operands (pad values, dynamic starts) take no factors.
    for (int d = 0; d < x->rank(); ++d) dims.push_back(x->rank() == n.rank() ? std::vector<int>{d} : std::vector<int>{});
    r.operands.push_back(dims);
  }
  for (int d = 0; d < n.rank(); ++d) r.result.push_back({d});
  return r;
}

FactorRule replicated_factors(const Node& n) {
  FactorRule r;
  for (auto& x : n.in) {
    std::vector<std::vector<int>> dims;
    for (auto s : x->shape()) dims.push_back({r.add_factor(s, false, true)});
    r.operands.push_back(dims);
  }
  for (auto s : n.shape()) r.result.push_back({r.add_factor(s, false, true)});
  return r;
}

FactorRule leaf_factors(const Node& n) {
  FactorRule r;
  for (auto s : n.shape()) r.result.push_back({r.add_factor(s)});
  return r;
}

}  // namespace rule_util

[[noreturn]] void rule_util::not_linear(const Node& n) {
  throw InternalError(std::string(op_name(n.op)) + " is not linear: it has no transpose");
}

// The API refuses complex operands of most ops without a complex form
// (comparisons, bitwise and rounding ops, erf, atan2, threefry, top_k); the
// others are not supported by the compiler yet.
[[noreturn]] void rule_util::no_complex_form(const Node& n) {
  throw NotImplementedError(detail::cat(op_name(n.op), " of complex values (", n.aval.str(),
                                        ") is not supported by the compiler yet"));
}
[[noreturn]] void rule_util::complex_never_reaches(const Node& n) {
  throw InternalError(detail::cat(op_name(n.op), " of complex values (", n.aval.str(), ") reached the complex expander"));
}

double rule_util::bytes_accessed(const Node& n) {
  double bytes = double(numel(n.shape())) * double(dtype_size(n.dtype()));
  for (auto& x : n.in) bytes += double(numel(x->shape())) * double(dtype_size(x->dtype()));
  return bytes;
}
NodeCost rule_util::elementwise_cost(const Node& n) {
  NodeCost c;
  (op_cost(n.op) == OpCost::Transcendental ? c.transcendentals : c.flops) = double(numel(n.shape()));
  c.bytes_accessed = bytes_accessed(n);
  return c;
}
NodeCost rule_util::memory_cost(const Node& n) {
  NodeCost c;
  c.bytes_accessed = bytes_accessed(n);
  return c;
}
NodeCost rule_util::no_cost(const Node&) { return {}; }
NodeCost rule_util::reduce_cost(const Node& n) {
  NodeCost c;
  c.flops = double(numel(n.in[0]->shape()));
  c.bytes_accessed = bytes_accessed(n);
  return c;
}

namespace ad {

NodeRef add(NodeTable& t, const NodeRef& a, const NodeRef& b) {
  if (!a) return b;
  if (!b) return a;
  if (a->aval.tuple) {
    // Cotangents of a node with several results: element by element.
    std::vector<NodeRef> parts;
    for (size_t i = 0; i < a->aval.elements.size(); ++i)
      parts.push_back(add(t, build::get_tuple_element(t, a, std::int64_t(i)), build::get_tuple_element(t, b, std::int64_t(i))));
    return build::tuple(t, parts);
  }
  return build::binary(t, Op::add, a, b);
}

NodeRef neg(NodeTable& t, const NodeRef& a) { return a ? build::unary(t, Op::neg, a) : nullptr; }

NodeRef mul(NodeTable& t, const NodeRef& a, const NodeRef& b) { return a ? build::binary(t, Op::mul, a, b) : nullptr; }

NodeRef div(NodeTable& t, const NodeRef& a, const NodeRef& b) { return a ? build::binary(t, Op::div, a, b) : nullptr; }

NodeRef scalar_like(NodeTable& t, const NodeRef& like, double v) {
  return build::broadcast_in_dim(t, build::scalar(t, like->dtype(), v, like->aval.weak_type), like->shape(), {});
}

NodeRef zeros_like(NodeTable& t, const NodeRef& like) { return scalar_like(t, like, 0.0); }

NodeRef zeros(NodeTable& t, const Aval& a) { return build::broadcast_in_dim(t, build::scalar(t, a.dtype, 0), a.shape, {}); }

std::vector<NodeRef> dense_tangents(NodeTable& t, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx) {
  bool any = false;
  for (auto& d : tx) any = any || d;
  std::vector<NodeRef> out;
  if (!any) return out;
  for (size_t k = 0; k < x.size(); ++k) out.push_back(tx[k] ? tx[k] : zeros_like(t, x[k]));
  return out;
}

NodeRef unbroadcast(NodeTable& t, const NodeRef& ct, const Shape& shape, const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> sum_axes;
  std::vector<bool> kept(ct->rank(), false);
  for (size_t i = 0; i < dims.size(); ++i)
    if (shape[i] == ct->shape()[dims[i]]) kept[dims[i]] = true;
  for (int d = 0; d < ct->rank(); ++d)
    if (!kept[d]) sum_axes.push_back(d);
  NodeRef r = build::reduce(t, Op::reduce_sum, ct, sum_axes);
  return build::reshape(t, r, shape);
}

}  // namespace ad

int FactorRule::add_factor(std::int64_t size, bool is_reduction, bool replicate) {
  sizes.push_back(size);
  reduction.push_back(is_reduction);
  need_replication.push_back(replicate);
  return int(sizes.size()) - 1;
}
}  // namespace tessel
