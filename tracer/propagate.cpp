#include "tracer/propagate.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include "tessel/core/errors.hpp"
#include "tracer/control_rules.hpp"

namespace tessel {

AxisSharding sharding_from_factors(const MeshRef& mesh, const std::vector<std::vector<int>>& dims,
                                   const std::vector<std::vector<int>>& factor_axes) {
  AxisSharding s = replicated(mesh, int(dims.size()));
  for (size_t d = 0; d < dims.size(); ++d)
    for (int f : dims[d]) s.dims[d].insert(s.dims[d].end(), factor_axes[f].begin(), factor_axes[f].end());
  return s;
}

namespace {

struct Proposal {
  std::vector<std::vector<int>> axes;  // per factor; empty: says nothing
  std::vector<bool> speaks;
};

// What a participant's sharding says about its factors: a dim's axes go to its
// factors major to minor, each factor taking axes while they divide what is
// left of it; a factor must be fully split before the next takes any.
Proposal propose(const FactorRule& r, const std::vector<std::vector<int>>& dims, const AxisSharding& s) {
  Proposal p;
  p.axes.assign(r.sizes.size(), {});
  p.speaks.assign(r.sizes.size(), false);
  const auto& axes = s.mesh->axes();
  for (size_t d = 0; d < dims.size() && d < s.dims.size(); ++d) {
    for (int f : dims[d]) p.speaks[f] = true;
    size_t fi = 0;
    std::int64_t left = dims[d].empty() ? 1 : r.sizes[dims[d][0]];
    for (int a : s.dims[d]) {
      while (fi < dims[d].size() && left == 1) {
        ++fi;
        left = fi < dims[d].size() ? r.sizes[dims[d][fi]] : 1;
      }
      if (fi >= dims[d].size()) break;
      std::int64_t size = axes[a].size;
      if (left % size != 0) {
        // A dim of one factor may split unevenly (padded tiles), even over
        // more tiles than it has rows (tiles of padding only, as 13 rows
        // over 8 tiles of 2 already leave the last: 4 pooled rows of an
        // image split over 8 devices stay split, never gathered); in
        // compound dims tiles must nest.
        if (dims[d].size() != 1) break;
        p.axes[dims[d][fi]].push_back(a);
        left = 1;
        continue;
      }
      p.axes[dims[d][fi]].push_back(a);
      left /= size;
    }
  }
  return p;
}

struct OpState {
  std::vector<std::vector<int>> axes;
  std::vector<bool> set, by_result, conflicted;
};

// `pinned`: the proposal of a fixed result (a constraint), which operands
// cannot override. A replicated dim says nothing (slicing it is free).
void merge(OpState& st, const FactorRule& r, const Proposal& p, bool pinned) {
  for (size_t f = 0; f < r.sizes.size(); ++f) {
    if (!p.speaks[f] || r.need_replication[f]) continue;
    if (p.axes[f].empty() && !pinned) continue;
    if (!st.set[f]) {
      // An axis may split only one factor.
      bool clash = false;
      for (size_t g = 0; g < r.sizes.size() && !clash; ++g)
        if (g != f && st.set[g])
          for (int a : p.axes[f])
            if (std::find(st.axes[g].begin(), st.axes[g].end(), a) != st.axes[g].end()) clash = true;
      if (clash || st.conflicted[f]) continue;
      st.axes[f] = p.axes[f];
      st.set[f] = true;
      st.by_result[f] = pinned;
    } else if (st.axes[f] != p.axes[f] && !st.by_result[f]) {
      // Two participants disagree: the factor stays unsplit.
      st.axes[f].clear();
      st.conflicted[f] = true;
    }
  }
}

// In a dim made of several factors, a factor can be split only when every
// factor before it is split whole (the dim's tiles must stay contiguous).
void legalize(OpState& st, const FactorRule& r, const DeviceMesh& mesh) {
  auto walk = [&](const std::vector<int>& factors) {
    bool blocked = false;
    for (int f : factors) {
      if (blocked) {
        st.axes[f].clear();
        continue;
      }
      std::int64_t split = 1;
      for (int a : st.axes[f]) split *= mesh.axes()[a].size;
      if (split != r.sizes[f]) blocked = true;
    }
  };
  for (auto& op : r.operands)
    for (auto& d : op) walk(d);
  for (auto& d : r.result) walk(d);
  for (auto& e : r.results)
    for (auto& d : e) walk(d);
}

struct Propagator {
  const Graph& g;
  MeshRef mesh;
  std::vector<NodeRef> order;
  std::unordered_map<const Node*, AxisSharding> value;
  std::unordered_map<const Node*, bool> fixed;
  std::unordered_map<const Node*, std::string> reason;
  std::unordered_map<const Node*, const Node*> via;
  // A tuple-valued op with a factor rule (lu, qr, ...): its elements' nodes, per element.
  std::unordered_map<const Node*, std::vector<std::vector<const Node*>>> elements;

  void find_elements() {
    for (auto& n : order)
      if (n->op == Op::get_tuple_element && has_factored_elements(*n->in[0])) {
        auto& e = elements[n->in[0].get()];
        e.resize(n->in[0]->aval.elements.size());
        e.at(size_t(n->attr<attr::TupleIndex>().index)).push_back(n.get());
      }
  }
  // Whether n's result (or, for a tuple, one of its elements) has a sharding yet.
  bool result_known(const Node* n) const {
    if (value.count(n)) return true;
    auto it = elements.find(n);
    if (it != elements.end())
      for (auto& e : it->second)
        for (const Node* x : e)
          if (value.count(x)) return true;
    return false;
  }

  // Runs one op's rule: fills its participants whose sharding is unknown.
  // Returns the factor axes it settled on.
  std::vector<std::vector<int>> visit(const NodeRef& n, bool assign) {
    FactorRule r = rules(n->op).factors(*n);
    OpState st;
    st.axes.assign(r.sizes.size(), {});
    st.set.assign(r.sizes.size(), false);
    st.by_result.assign(r.sizes.size(), false);
    st.conflicted.assign(r.sizes.size(), false);
    auto known = [&](const Node* v) { return value.count(v) > 0; };
    auto is_fixed = [&](const Node* v) { return fixed.count(v) && fixed.at(v); };
    // Fixed participants first (the result, then operands), then the others.
    // The result participants: n itself, or its elements' nodes.
    std::vector<std::pair<const Node*, const std::vector<std::vector<int>>*>> results;
    if (r.results.empty()) results.push_back({n.get(), &r.result});
    else if (auto it = elements.find(n.get()); it != elements.end())
      for (size_t k = 0; k < it->second.size(); ++k)
        for (const Node* e : it->second[k]) results.push_back({e, &r.results.at(k)});
    for (int pass = 0; pass < 2; ++pass) {
      bool want_fixed = pass == 0;
      for (auto& [y, dims] : results)
        if (known(y) && is_fixed(y) == want_fixed && want_fixed) merge(st, r, propose(r, *dims, value.at(y)), true);
      for (size_t k = 0; k < n->in.size(); ++k) {
        const Node* x = n->in[k].get();
        if (r.is_unread(k)) continue;
        if (known(x) && is_fixed(x) == want_fixed) merge(st, r, propose(r, r.operands[k], value.at(x)), false);
      }
      for (auto& [y, dims] : results)
        if (known(y) && !is_fixed(y) && !want_fixed) merge(st, r, propose(r, *dims, value.at(y)), false);
    }
    legalize(st, r, *mesh);
    if (assign) {
      for (auto& [y, dims] : results)
        if (!known(y) && y->op != Op::parameter) {
          value[y] = sharding_from_factors(mesh, *dims, st.axes);
          reason[y] = std::string(op_name(n->op)) + "'s rule, from its operands";
          via[y] = n.get();
        }
      for (size_t k = 0; k < n->in.size(); ++k) {
        const Node* x = n->in[k].get();
        if (!known(x) && !r.is_unread(k)) {
          value[x] = sharding_from_factors(mesh, r.operands[k], st.axes);
          reason[x] = std::string(op_name(n->op)) + "'s rule, back from its user: operand " + std::to_string(k) + " of";
          via[x] = n.get();
        }
      }
    }
    return st.axes;
  }
};

}  // namespace

namespace {

// A partial sum whose only user constrains it to split one dim by exactly
// the reduced axes takes that sharding itself, so the partitioner emits one
// reduce-scatter instead of an all-reduce and a slice (XLA forms the same
// reduce-scatter from the all-reduce + dynamic-slice pair after the fact).
void scatter_into_constraints(const Graph& g, const std::vector<NodeRef>& order, const ShardingAssignment& out,
                              std::unordered_map<const Node*, AxisSharding>& value,
                              std::unordered_map<const Node*, std::string>& reason,
                              std::unordered_map<const Node*, const Node*>& via) {
  std::unordered_map<const Node*, int> uses;
  for (auto& n : order)
    for (auto& x : n->in) ++uses[x.get()];
  for (auto& o : g.outputs) ++uses[o.get()];
  for (auto& c : order) {
    if (c->op != Op::sharding_constraint) continue;
    const Node* n = c->in[0].get();
    if (uses[n] != 1 || n->op == Op::parameter || !out.factor_axes.count(n)) continue;
    FactorRule r = rules(n->op).factors(*n);
    const auto& fa = out.factor_axes.at(n);
    const std::vector<int> unreduced = unreduced_axes(r, fa);
    if (unreduced.empty()) continue;
    const AxisSharding& want = value.at(c.get());
    if (reduce_scatter_dim(sharding_from_factors(out.mesh, r.result, fa), want, unreduced, n->shape()) < 0) continue;
    value[n] = want;
    reason[n] = std::string(op_name(n->op)) + "'s partial sums, scattered as its user asks: with_sharding_constraint";
    via[n] = c.get();
  }
}

}  // namespace

std::vector<int> unreduced_axes(const FactorRule& rule, const std::vector<std::vector<int>>& factor_axes) {
  std::vector<int> axes;
  for (size_t f = 0; f < factor_axes.size(); ++f)
    if (rule.reduction[f]) axes.insert(axes.end(), factor_axes[f].begin(), factor_axes[f].end());
  return axes;
}

int reduce_scatter_dim(const AxisSharding& natural, const AxisSharding& value, const std::vector<int>& unreduced,
                       const Shape& shape) {
  if (value.rank() != natural.rank()) return -1;
  int dim = -1;
  for (int d = 0; d < natural.rank(); ++d) {
    const auto& N = natural.dims[d];
    const auto& V = value.dims[d];
    if (V == N) continue;
    const bool extends = dim < 0 && V.size() == N.size() + unreduced.size() && std::equal(N.begin(), N.end(), V.begin()) &&
                         std::vector<int>(V.begin() + N.size(), V.end()) == unreduced && shape[d] % value.num_tiles(d) == 0;
    if (!extends) return -1;
    dim = d;
  }
  return dim;
}

namespace {
// Ops without a factor rule: a shard_map pins its results to its out_specs
// (the partitioner reshards its operands to its in_specs); a tuple has no
// sharding, its elements have.
bool opaque(const Node& n) { return op_family(n.op) == OpFamily::Region || op_family(n.op) == OpFamily::Tuple; }

// The sharding a shard_map (or an element of one) fixes, if n is one.
std::optional<AxisSharding> pinned_by_shard_map(const Node& n) {
  if (n.op == Op::shard_map && !n.aval.tuple) return n.attr<attr::ShardMap>().out_specs.at(0);
  if (n.op == Op::get_tuple_element && n.in[0]->op == Op::shard_map)
    return n.in[0]->attr<attr::ShardMap>().out_specs.at(size_t(n.attr<attr::TupleIndex>().index));
  return std::nullopt;
}
}  // namespace

bool has_factored_elements(const Node& n) { return n.aval.tuple && op_family(n.op) == OpFamily::Library; }

// What propagation through region g gives its parameters and outputs, its
// parameters laid out as `params` (open where `open` says: propagation chooses).
RegionValues region_values(const Graph& g, const MeshRef& mesh, const std::vector<AxisSharding>& params,
                           const std::vector<bool>& open) {
  PropagationInput pin{mesh, {}};
  for (size_t k = 0; k < params.size(); ++k)
    pin.params.push_back(k < open.size() && open[k] ? std::nullopt : std::optional<AxisSharding>(params[k]));
  ShardingAssignment a = propagate(g, pin);
  RegionValues r;
  for (auto& p : g.params) r.params.push_back(a.value.at(p.get()));
  for (auto& o : g.outputs) r.outputs.push_back(a.value.at(o.get()));
  return r;
}
ShardingAssignment propagate(const Graph& g, const PropagationInput& in) {
  Propagator p{g, in.mesh, g.topo_order(), {}, {}, {}, {}, {}};
  p.find_elements();
  for (size_t i = 0; i < g.params.size(); ++i)
    if (i < in.params.size() && in.params[i]) {
      p.value[g.params[i].get()] = *in.params[i];
      p.fixed[g.params[i].get()] = true;
      p.reason[g.params[i].get()] = "input " + std::to_string(i) + ": its own sharding (committed, or in_shardings)";
    }
  for (auto& n : p.order) {
    if (n->op == Op::sharding_constraint) {
      p.value[n.get()] = *n->attr<attr::Constraint>().sharding;
      p.fixed[n.get()] = true;
      p.reason[n.get()] = "with_sharding_constraint";
    }
    if (auto s = pinned_by_shard_map(*n)) {
      p.value[n.get()] = *s;
      p.fixed[n.get()] = true;
      p.reason[n.get()] = "shard_map's out_specs";
    }
  }
  // A control-flow op's results are settled once its operands are.
  std::unordered_map<const Node*, RegionShardings> regions;
  // Settles c's boundary; operands not known yet take what c's regions give
  // them (a carry's init: the carry's sharding, backward across the boundary).
  auto settle = [&](const Node& c) -> const RegionShardings& {
    auto it = regions.find(&c);
    if (it != regions.end()) return it->second;
    std::vector<AxisSharding> ops;
    std::vector<bool> open;
    for (auto& x : c.in) {
      open.push_back(!p.value.count(x.get()));
      ops.push_back(open.back() ? replicated(in.mesh, x->rank()) : p.value.at(x.get()));
    }
    RegionShardings& r = regions[&c] = control_rules(c.op).boundary(c, ops, in.mesh, open);
    for (size_t k = 0; k < c.in.size(); ++k)
      if (open[k]) {
        p.value[c.in[k].get()] = r.operands[k];
        p.reason[c.in[k].get()] = std::string("the carry of its ") + op_name(c.op) + ", as the body leaves it";
      }
    return r;
  };
  auto control_result = [&](const Node& n) {
    return n.op == Op::get_tuple_element && is_control_flow(n.in[0]->op);
  };
  // open_carries: operands still unknown (a carry's init, say) may settle,
  // taking what their region gives them (after a forward and a backward
  // round, so that an operand's own sharding is seen first).
  auto settle_results = [&](const NodeRef& n, bool open_carries) {
    if (!control_result(*n) || p.value.count(n.get())) return;
    const Node& c = *n->in[0];
    if (!open_carries)
      for (auto& x : c.in)
        if (!p.value.count(x.get())) return;
    p.value[n.get()] = settle(c).results.at(size_t(n->attr<attr::TupleIndex>().index));
    p.reason[n.get()] = std::string("the boundary of its ") + op_name(c.op);
  };
  // Forward, backward, forward: enough for values to reach from any fixed
  // one; then backward and forward again when a loop's carry settled its
  // init's sharding.
  const bool loops = std::any_of(p.order.begin(), p.order.end(),
                                 [](const NodeRef& n) { return is_loop(n->op); });
  for (int round = 0; round < (loops ? 5 : 3); ++round) {
    if (round % 2 == 0) {
      for (auto& n : p.order) settle_results(n, round >= 2);
      for (auto& n : p.order)
        if (n->op != Op::parameter && !opaque(*n) && (p.result_known(n.get()) || !n->in.empty())) {
          bool any = p.result_known(n.get());
          for (auto& x : n->in) any = any || p.value.count(x.get());
          if (any) p.visit(n, true);
        }
    } else {
      for (auto it = p.order.rbegin(); it != p.order.rend(); ++it) {
        const NodeRef& n = *it;
        if (n->op == Op::parameter || opaque(*n)) continue;
        bool any = p.result_known(n.get());
        for (auto& x : n->in) any = any || p.value.count(x.get());
        if (any) p.visit(n, true);
      }
    }
  }
  ShardingAssignment out;
  out.mesh = in.mesh;
  for (auto& n : p.order)
    if (!p.value.count(n.get()) && !n->aval.tuple) {
      p.value[n.get()] = replicated(in.mesh, n->rank());
      p.reason[n.get()] = "no sharding reached it: replicated";
      p.via.erase(n.get());
    }
  // Control-flow ops whose operands were settled only by the default.
  for (auto& n : p.order) {
    if (!control_result(*n)) continue;
    const Node& c = *n->in[0];
    p.value[n.get()] = settle(c).results.at(size_t(n->attr<attr::TupleIndex>().index));
  }
  for (auto& n : p.order)
    if (is_control_flow(n->op)) out.regions[n.get()] = settle(*n);
  for (auto& n : p.order)
    if (n->op != Op::parameter && !opaque(*n)) out.factor_axes[n.get()] = p.visit(n, false);
  scatter_into_constraints(g, p.order, out, p.value, p.reason, p.via);
  out.value = std::move(p.value);
  out.reason = std::move(p.reason);
  out.via = std::move(p.via);
  return out;
}

}  // namespace tessel
