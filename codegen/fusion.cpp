#include "codegen/fusion.hpp"

#include <algorithm>
#include <functional>

#include "codegen/conv.hpp"
#include "codegen/transpose.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

// Work per element of an op when inlined (a rough count of instructions).
// The cost of recomputing an op inside a fused loop (its class is in the op list).
int own_cost(Op op) {
  switch (op_cost(op)) {
    case OpCost::Free: return 0;
    case OpCost::Cheap: return 1;
    case OpCost::Costly: return 4;
    case OpCost::Transcendental: return 20;
    case OpCost::Heavy: return 40;
    case OpCost::Never: return 1000;  // never inlined
  }
  __builtin_unreachable();
}

bool is_control(const Node& n) { return is_control_flow(n.op); }

bool always_materialized(const Node& n) {
  switch (op_family(n.op)) {
    case OpFamily::Reduce: case OpFamily::Dot: case OpFamily::Collective: case OpFamily::Library: return true;
    case OpFamily::Leaf:
      return n.op == Op::parameter || n.op == Op::axis_index || (n.op == Op::constant && !n.shape().empty());
    case OpFamily::Unary: case OpFamily::Binary: case OpFamily::Compare: case OpFamily::Select:
    case OpFamily::Nary: case OpFamily::Convert: case OpFamily::Shape: case OpFamily::Annotation:
      // An expression its consumers must not recompute (window_select: made
      // once per window, read by every element of it).
      return op_cost(n.op) == OpCost::Never;
    case OpFamily::Tuple: case OpFamily::Region:
      // A control-flow op's results sit in buffers of their own.
      if (is_control(n) || (n.op == Op::get_tuple_element && (is_control(*n.in[0]) || n.in[0]->aval.tuple))) return true;
      throw InternalError(std::string(op_name(n.op)) + " reached codegen: inline_calls removes it first");
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
    case OpFamily::Tuple: case OpFamily::Region:
      if (is_control(n)) return StepKind::Control;
      throw InternalError(std::string(op_name(n.op)) + " reached codegen: inline_calls removes it first");
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
  // Convolutions that read their input's parts (conv_reads_parts): the
  // concatenation is never made where every use of it is such a
  // convolution's input (the forward and the kernel's gradient read the
  // same one).
  std::vector<const Node*> candidates;
  std::unordered_map<const Node*, int> part_reads;
  for (auto& n : order)
    if (conv_reads_parts(*n) && n->in[1] != n->in[0]) {
      candidates.push_back(n.get());
      ++part_reads[n->in[0].get()];
    }
  std::unordered_set<const Node*> by_parts;
  for (const Node* n : candidates)
    if (part_reads[n->in[0].get()] == users[n->in[0].get()] && !plan.materialized.count(n->in[0].get()))
      by_parts.insert(n);
  auto reads_of = [&](const NodeRef& n) {
    if (!by_parts.count(n.get())) return n->in;
    std::vector<NodeRef> r = n->in[0]->in;
    r.push_back(n->in[1]);
    return r;
  };
  for (auto& n : order) {
    if (always_materialized(*n)) plan.materialized.insert(n.get());
    // A large transpose moving the last dim and its operand are in memory:
    // read inside a loop nest, each of its elements would be a line of its
    // own (codegen/transpose.hpp).
    if (transposes_by_blocks(*n)) plan.materialized.insert({n.get(), n->in[0].get()});
    // Library calls and collectives read their operands from memory.
    auto f = op_family(n->op);
    if (f == OpFamily::Dot || f == OpFamily::Collective || f == OpFamily::Library || is_control(*n))
      for (auto& x : reads_of(n)) plan.materialized.insert(x.get());
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
  // A materialised dynamic_update_slice of a small window whose operand is in
  // memory anyway (a parameter, a materialised value, or such an update read
  // only here: a chain x.at[i].set(a).at[j].set(b)) writes only its window
  // (Step::Update): O(window) where the operand's buffer can be written over
  // (a loop's carry, a dead temporary), else one copy and the window, never a
  // loop nest over the whole array. Its operands are read from memory.
  std::unordered_set<const Node*> updates;
  auto small_window = [](const Node& n) {
    return n.op == Op::dynamic_update_slice && 4 * numel(n.in[1]->shape()) <= numel(n.shape());
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeRef& n = *it;
    if (!plan.materialized.count(n.get()) || !small_window(*n)) continue;
    const Node& x = *n->in[0];
    if (!(x.op == Op::parameter || plan.materialized.count(&x) || (small_window(x) && users[&x] == 1))) continue;
    updates.insert(n.get());
    for (auto& in : n->in) plan.materialized.insert(in.get());
  }
  for (auto& n : order) {
    if (!plan.materialized.count(n.get()) || n->op == Op::parameter) continue;
    if (n->op == Op::get_tuple_element) continue;  // an element of a tuple-valued op's results: its step writes it
    Step s{updates.count(n.get()) ? StepKind::Update : transposes_by_blocks(*n) ? StepKind::Transpose : step_kind(*n), n, {}};
    if (s.kind == StepKind::Update || s.kind == StepKind::Transpose || s.kind == StepKind::Dot || s.kind == StepKind::Collective || s.kind == StepKind::Library ||
        s.kind == StepKind::Control)
      s.reads = reads_of(n);
    else if (s.kind != StepKind::Constant) s.reads = leaves_of(n, plan.materialized);
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

}  // namespace tessel::codegen
