#include "codegen/fusion.hpp"

#include <algorithm>
#include <functional>

#include "tracer/errors.hpp"

namespace tessel::codegen {

namespace {

// Work per element of an op when inlined (a rough count of instructions).
int own_cost(Op op) {
  switch (op) {
    case Op::axis_index: case Op::sort:
      return 1000;
    case Op::threefry2x32:
      return 40;
    case Op::parameter: case Op::constant: case Op::iota: case Op::broadcast_in_dim: case Op::reshape: case Op::rev:
    case Op::transpose: case Op::slice: case Op::sharding_constraint: case Op::convert: case Op::bitcast_convert:
      return 0;
    case Op::sin: case Op::cos: case Op::tan: case Op::tanh: case Op::exp: case Op::expm1: case Op::log:
    case Op::log1p: case Op::logistic: case Op::erf_inv: case Op::erf: case Op::pow: case Op::atan2:
      return 20;
    case Op::div: case Op::rem: case Op::sqrt: case Op::rsqrt:
      return 4;
    case Op::neg: case Op::abs: case Op::sign: case Op::floor: case Op::ceil: case Op::round: case Op::is_finite:
    case Op::not_: case Op::add: case Op::sub: case Op::mul: case Op::max: case Op::min: case Op::and_:
    case Op::or_: case Op::xor_: case Op::shift_left: case Op::shift_right_logical: case Op::eq: case Op::ne:
    case Op::lt: case Op::le: case Op::gt: case Op::ge: case Op::select: case Op::pad: case Op::concatenate:
    case Op::dynamic_slice: case Op::dynamic_update_slice:
      return 1;
    case Op::reduce_sum: case Op::reduce_max: case Op::reduce_min: case Op::reduce_prod: case Op::argmax:
    case Op::argmin: case Op::dot_general: case Op::all_gather: case Op::all_reduce: case Op::reduce_scatter:
    case Op::all_to_all: case Op::collective_permute:
      return 1000;  // never inlined
  }
  __builtin_unreachable();
}

bool always_materialized(const Node& n) {
  switch (op_family(n.op)) {
    case OpFamily::Reduce: case OpFamily::Dot: case OpFamily::Collective: case OpFamily::Library: return true;
    case OpFamily::Leaf:
      return n.op == Op::parameter || n.op == Op::axis_index || (n.op == Op::constant && !n.shape().empty());
    case OpFamily::Unary: case OpFamily::Binary: case OpFamily::Compare: case OpFamily::Select:
    case OpFamily::Nary: case OpFamily::Convert: case OpFamily::Shape: case OpFamily::Annotation: return false;
  }
  __builtin_unreachable();
}

StepKind step_kind(const Node& n) {
  switch (op_family(n.op)) {
    case OpFamily::Reduce: return StepKind::Reduce;
    case OpFamily::Dot: return StepKind::Dot;
    case OpFamily::Collective: return StepKind::Collective;
    case OpFamily::Library: return StepKind::Library;
    case OpFamily::Leaf:
      return n.op == Op::constant ? StepKind::Constant : n.op == Op::axis_index ? StepKind::AxisIndex : StepKind::Loop;
    case OpFamily::Unary: case OpFamily::Binary: case OpFamily::Compare: case OpFamily::Select:
    case OpFamily::Nary: case OpFamily::Convert: case OpFamily::Shape: case OpFamily::Annotation: return StepKind::Loop;
  }
  __builtin_unreachable();
}

}  // namespace

std::vector<NodeRef> leaves_of(const NodeRef& root, const std::unordered_set<const Node*>& materialized) {
  // Depth first, operands left to right, first visits only (the order is the
  // kernel's signature); an explicit stack, as expressions may be deep.
  std::vector<NodeRef> leaves;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<std::pair<const Node*, std::size_t>> stack{{root.get(), 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i == n->in.size()) {
      stack.pop_back();
      continue;
    }
    const NodeRef& x = n->in[i++];
    if (!seen.insert(x.get()).second) continue;
    if (materialized.count(x.get())) leaves.push_back(x);
    else stack.push_back({x.get(), 0});
  }
  return leaves;
}

FusionPlan plan_fusion(const Graph& g) {
  FusionPlan plan;
  auto order = g.topo_order();
  std::unordered_map<const Node*, int> users;
  for (auto& n : order)
    for (auto& x : n->in) ++users[x.get()];
  for (auto& o : g.outputs) plan.materialized.insert(o.get());
  for (auto& n : order) {
    if (always_materialized(*n)) plan.materialized.insert(n.get());
    // Library calls and collectives read their operands from memory.
    auto f = op_family(n->op);
    if (f == OpFamily::Dot || f == OpFamily::Collective || f == OpFamily::Library)
      for (auto& x : n->in) plan.materialized.insert(x.get());
  }
  // Values used more than once: materialise when recomputing them is not cheap.
  // Fused expressions are at most kMaxFusedDepth deep: emission recurses
  // over them, and a 100,000-op chain must neither overflow the stack nor
  // become one kernel LLVM takes minutes over (equal segments share one
  // cached kernel).
  std::unordered_map<const Node*, int> cost, depth;
  for (auto& n : order) {
    int c = own_cost(n->op), d = 1;
    for (auto& x : n->in)
      if (!plan.materialized.count(x.get())) c += cost[x.get()], d = std::max(d, depth[x.get()] + 1);
    cost[n.get()] = c;
    depth[n.get()] = d;
    if (n->op == Op::parameter) continue;
    if ((users[n.get()] > 1 && c > 4) || d >= kMaxFusedDepth) plan.materialized.insert(n.get());
  }
  for (auto& n : order) {
    if (!plan.materialized.count(n.get()) || n->op == Op::parameter) continue;
    Step s{step_kind(*n), n, {}};
    if (s.kind == StepKind::Dot || s.kind == StepKind::Collective || s.kind == StepKind::Library) s.reads = n->in;
    else if (s.kind != StepKind::Constant) s.reads = leaves_of(n, plan.materialized);
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

}  // namespace tessel::codegen
