// The control-flow ops' region rules (tracer/control_rules.hpp): how cond,
// while_ and scan take shardings at their regions' boundaries, how they are
// typed in shard_map bodies, and how the reference interpreter runs them.
// Their other rules (shape, autodiff, batching) are in rules_control.cpp.
#include <algorithm>
#include <cstring>

#include "tessel/core/errors.hpp"
#include "tracer/control_rules.hpp"

namespace tessel {

namespace {

AxisSharding without_leading(const AxisSharding& s) {
  AxisSharding r = s;
  r.dims.erase(r.dims.begin());
  return r;
}
AxisSharding with_leading(const AxisSharding& s) {
  AxisSharding r = s;
  r.dims.insert(r.dims.begin(), std::vector<int>{});
  return r;
}
std::vector<AxisSharding> region_outputs(const Graph& g, const MeshRef& mesh, const std::vector<AxisSharding>& params) {
  return region_values(g, mesh, params).outputs;
}
// Operands enter as they are, reduced.
RegionShardings entering(const std::vector<AxisSharding>& ops) {
  RegionShardings r;
  r.operands = ops;
  for (auto& s : r.operands) s.unreduced.clear();
  return r;
}

AxisSet unite(AxisSet a, const AxisSet& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// The positions' values of operands [from, from + count).
std::vector<PerDevice> operands_of(const std::vector<const PerDevice*>& in, size_t from, size_t count) {
  std::vector<PerDevice> out;
  for (size_t k = from; k < from + count; ++k) out.push_back(*in[k]);
  return out;
}
[[noreturn]] void varying(const Node& n, const char* what) {
  throw NotImplementedError(
      detail::cat(op_name(n.op), " whose ", what, " differs between devices while its regions hold collectives"));
}

}  // namespace

// ------------------------------------------------------------------ boundaries (propagation)
// A control-flow op's boundary from its operands' shardings: operands enter
// as they are (a cond's index replicated); a loop's carries keep one
// sharding throughout: their init's, or, where the init's is not known yet
// (`open`: zeros, say), what the body gives the carry (the init then takes
// it: the fixpoint across the boundary); a cond's results and a scan's ys
// take what propagation through the (first) region gives.

RegionShardings ControlRule<Op::cond>::boundary(const Node& n, const std::vector<AxisSharding>& ops,
                                                const MeshRef& mesh, const std::vector<bool>& open) {
  RegionShardings r = entering(ops);

  r.operands[0] = replicated(mesh, 0);
  const auto& branches = n.attr<attr::Cond>().branches;
  if (std::any_of(open.begin() + 1, open.end(), [](bool b) { return b; })) {
    auto v = region_values(*branches[0], mesh, std::vector<AxisSharding>(r.operands.begin() + 1, r.operands.end()),
                           std::vector<bool>(open.begin() + 1, open.end()));
    for (size_t k = 1; k < r.operands.size(); ++k)
      if (open[k]) r.operands[k] = v.params[k - 1];
  }
  std::vector<AxisSharding> params(r.operands.begin() + 1, r.operands.end());
  r.results = region_outputs(*branches[0], mesh, params);
  for (size_t b = 0; b < branches.size(); ++b) {
    r.params.push_back(params);
    r.outputs.push_back(r.results);
  }
  return r;
}

RegionShardings ControlRule<Op::while_>::boundary(const Node& n, const std::vector<AxisSharding>& ops,
                                                  const MeshRef& mesh, const std::vector<bool>& open) {
  RegionShardings r = entering(ops);

  const auto& w = n.attr<attr::While>();
  const size_t cc = size_t(w.cond_consts), bc = size_t(w.body_consts);
  std::vector<AxisSharding> carries(r.operands.begin() + std::ptrdiff_t(cc + bc), r.operands.end());
  std::vector<AxisSharding> cp(r.operands.begin(), r.operands.begin() + std::ptrdiff_t(cc));
  std::vector<AxisSharding> bp(r.operands.begin() + std::ptrdiff_t(cc), r.operands.begin() + std::ptrdiff_t(cc + bc));
  if (std::any_of(open.begin() + std::ptrdiff_t(cc), open.end(), [](bool b) { return b; })) {
    std::vector<AxisSharding> all = bp;
    all.insert(all.end(), carries.begin(), carries.end());
    auto v = region_values(*w.body, mesh, all, std::vector<bool>(open.begin() + std::ptrdiff_t(cc), open.end()));
    for (size_t k = 0; k < bc; ++k)
      if (open[cc + k]) bp[k] = r.operands[cc + k] = v.params[k];
    for (size_t k = 0; k < carries.size(); ++k)
      if (open[cc + bc + k]) carries[k] = r.operands[cc + bc + k] = v.outputs[k];
  }
  cp.insert(cp.end(), carries.begin(), carries.end());
  bp.insert(bp.end(), carries.begin(), carries.end());
  r.results = carries;
  r.params = {cp, bp};
  r.outputs = {{replicated(mesh, 0)}, carries};
  return r;
}

RegionShardings ControlRule<Op::scan>::boundary(const Node& n, const std::vector<AxisSharding>& ops,
                                                const MeshRef& mesh, const std::vector<bool>& open) {
  RegionShardings r = entering(ops);

  const auto& sc = n.attr<attr::Scan>();
  const size_t c = size_t(sc.consts), m = size_t(sc.carries);
  if (std::any_of(open.begin(), open.end(), [](bool b) { return b; })) {
    std::vector<AxisSharding> all(r.operands.begin(), r.operands.begin() + std::ptrdiff_t(c + m));
    for (size_t k = c + m; k < r.operands.size(); ++k) all.push_back(without_leading(r.operands[k]));
    auto v = region_values(*sc.body, mesh, all, open);
    for (size_t k = 0; k < r.operands.size(); ++k) {
      if (!open[k]) continue;
      if (k < c)
        r.operands[k] = v.params[k];
      else if (k < c + m)
        r.operands[k] = v.outputs[k - c];
      else
        r.operands[k] = with_leading(v.params[k]);
    }
  }
  std::vector<AxisSharding> bp(r.operands.begin(), r.operands.begin() + std::ptrdiff_t(c + m));
  // xs keep their split along the scanned axis: each step fetches its
  // slice from the device holding it (tracer/partition.cpp), rather than
  // every device gathering the whole stack.
  for (size_t k = c + m; k < r.operands.size(); ++k) bp.push_back(without_leading(r.operands[k]));
  std::vector<AxisSharding> outs = region_outputs(*sc.body, mesh, bp);
  std::vector<AxisSharding> carries(r.operands.begin() + std::ptrdiff_t(c), r.operands.begin() + std::ptrdiff_t(c + m));
  r.results = carries;
  std::vector<AxisSharding> bo = carries;
  for (size_t k = m; k < outs.size(); ++k) {
    bo.push_back(outs[k]);
    r.results.push_back(with_leading(outs[k]));
  }
  r.params = {bp};
  r.outputs = {bo};
  return r;
}

// ------------------------------------------------------------------ typing (vma)
// A loop's carries vary over what their init and every step's result vary
// over (a fixpoint), and over what its predicate varies over (devices then
// stop at different steps); a cond's results over what any branch's do and
// what its index varies over. Devices whose predicate or index differ run
// different code, so the regions may not hold collectives then (they would
// wait for each other forever).

ControlTyping ControlRule<Op::cond>::typing(RegionTyper& typer, const Node& n, const std::vector<AxisSet>& in) {
  ControlTyping ct;

  const auto& branches = n.attr<attr::Cond>().branches;
  typer.no_collectives(n, in[0], "branch index", branches);
  std::vector<AxisSet> params(in.begin() + 1, in.end());
  ct.results.assign(branches[0]->outputs.size(), in[0]);
  for (auto& b : branches) {
    auto o = typer.outputs_of(*b, params);
    for (size_t k = 0; k < o.size(); ++k) ct.results[k] = unite(ct.results[k], o[k]);
  }
  for (size_t b = 0; b < branches.size(); ++b) ct.params.push_back(params), ct.outputs.push_back(ct.results);
  return ct;
}

ControlTyping ControlRule<Op::while_>::typing(RegionTyper& typer, const Node& n, const std::vector<AxisSet>& in) {
  ControlTyping ct;

  const auto& w = n.attr<attr::While>();
  const size_t cc = size_t(w.cond_consts), bc = size_t(w.body_consts);
  std::vector<AxisSet> carry(in.begin() + std::ptrdiff_t(cc + bc), in.end());
  std::vector<AxisSet> cp, bp;
  AxisSet pred;
  for (;;) {
    cp.assign(in.begin(), in.begin() + std::ptrdiff_t(cc));
    bp.assign(in.begin() + std::ptrdiff_t(cc), in.begin() + std::ptrdiff_t(cc + bc));
    cp.insert(cp.end(), carry.begin(), carry.end());
    bp.insert(bp.end(), carry.begin(), carry.end());
    pred = typer.outputs_of(*w.cond, cp).at(0);
    auto next = typer.outputs_of(*w.body, bp);
    bool changed = false;
    for (size_t k = 0; k < carry.size(); ++k) {
      AxisSet u = unite(unite(carry[k], next[k]), pred);
      if (u != carry[k]) carry[k] = std::move(u), changed = true;
    }
    if (!changed) break;
  }
  typer.no_collectives(n, pred, "predicate", {w.cond, w.body});
  ct.params = {cp, bp};
  ct.outputs = {{pred}, carry};
  ct.results = carry;
  return ct;
}

ControlTyping ControlRule<Op::scan>::typing(RegionTyper& typer, const Node& n, const std::vector<AxisSet>& in) {
  ControlTyping ct;

  const auto& s = n.attr<attr::Scan>();
  const size_t c = size_t(s.consts), m = size_t(s.carries);
  std::vector<AxisSet> carry(in.begin() + std::ptrdiff_t(c), in.begin() + std::ptrdiff_t(c + m)), bp, out;
  for (;;) {
    bp.assign(in.begin(), in.begin() + std::ptrdiff_t(c));
    bp.insert(bp.end(), carry.begin(), carry.end());
    bp.insert(bp.end(), in.begin() + std::ptrdiff_t(c + m), in.end());
    out = typer.outputs_of(*s.body, bp);
    bool changed = false;
    for (size_t k = 0; k < m; ++k) {
      AxisSet u = unite(carry[k], out[k]);
      if (u != carry[k]) carry[k] = std::move(u), changed = true;
    }
    if (!changed) break;
  }
  for (size_t k = 0; k < m; ++k) out[k] = carry[k];
  ct.params = {bp};
  ct.outputs = {out};
  ct.results = out;
  return ct;
}

// ------------------------------------------------------------------ the reference interpreter
// Over P positions at once: every position must take the same branch and
// the same number of steps when the regions hold collectives.

PerDevice ControlRule<Op::cond>::run(const Node& n, const std::vector<const PerDevice*>& in, std::int64_t P,
                                     const RunGraph& run_graph) {
  const size_t np = size_t(P);
  PerDevice result(np);

  const auto& branches = n.attr<attr::Cond>().branches;
  const std::int64_t nb = std::int64_t(branches.size());
  std::vector<std::int64_t> idx(np);
  for (size_t p = 0; p < np; ++p)
    idx[p] = std::clamp<std::int64_t>(std::int64_t((*in[0])[p].at(0).as_double(0)), 0, nb - 1);
  const bool uniform = std::all_of(idx.begin(), idx.end(), [&](std::int64_t i) { return i == idx[0]; });
  if (!uniform) {
    for (auto& b : branches)
      if (has_collectives(*b)) varying(n, "branch index");
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    if (std::find(idx.begin(), idx.end(), b) == idx.end()) continue;
    auto outs = run_graph(*branches[size_t(b)], operands_of(in, 1, in.size() - 1));
    for (size_t p = 0; p < np; ++p)
      if (idx[p] == b)
        for (auto& o : outs) result[p].push_back(o[p].at(0));
  }
  return result;
}

PerDevice ControlRule<Op::while_>::run(const Node& n, const std::vector<const PerDevice*>& in, std::int64_t P,
                                       const RunGraph& run_graph) {
  const size_t np = size_t(P);
  PerDevice result(np);

  const auto& w = n.attr<attr::While>();
  const size_t cc = size_t(w.cond_consts), bc = size_t(w.body_consts), m = in.size() - cc - bc;
  std::vector<PerDevice> carry = operands_of(in, cc + bc, m);
  const std::vector<PerDevice> cconsts = operands_of(in, 0, cc), bconsts = operands_of(in, cc, bc);
  const bool collectives = has_collectives(*w.cond) || has_collectives(*w.body);
  std::vector<bool> done(np, false);
  while (true) {
    std::vector<PerDevice> cargs = cconsts;
    cargs.insert(cargs.end(), carry.begin(), carry.end());
    auto pred = run_graph(*w.cond, std::move(cargs));
    bool any = false, all = true;
    for (size_t p = 0; p < np; ++p) {
      if (!done[p] && pred[0][p].at(0).as_double(0) == 0) done[p] = true;
      any = any || !done[p];
      all = all && !done[p];
    }
    if (!any) break;
    if (!all && collectives) varying(n, "predicate");
    std::vector<PerDevice> bargs = bconsts;
    bargs.insert(bargs.end(), carry.begin(), carry.end());
    auto next = run_graph(*w.body, std::move(bargs));
    for (size_t k = 0; k < m; ++k)
      for (size_t p = 0; p < np; ++p)
        if (!done[p]) carry[k][p] = std::move(next[k][p]);
  }
  for (size_t p = 0; p < np; ++p)
    for (size_t k = 0; k < m; ++k) result[p].push_back(carry[k][p].at(0));
  return result;
}

PerDevice ControlRule<Op::scan>::run(const Node& n, const std::vector<const PerDevice*>& in, std::int64_t P,
                                     const RunGraph& run_graph) {
  const size_t np = size_t(P);
  PerDevice result(np);

  const auto& s = n.attr<attr::Scan>();
  const size_t c = size_t(s.consts), m = size_t(s.carries), q = in.size() - c - m;
  const Graph& body = *s.body;
  const size_t ny = body.outputs.size() - m;
  std::vector<PerDevice> carry = operands_of(in, c, m);
  const std::vector<PerDevice> consts = operands_of(in, 0, c);
  // ys[k][p]: the stacked output, filled a slice at a time.
  std::vector<std::vector<HostArray>> ys(ny, std::vector<HostArray>(np));
  for (size_t k = 0; k < ny; ++k)
    for (size_t p = 0; p < np; ++p) {
      const Aval& a = n.aval.elements[m + k];
      ys[k][p].dtype = a.dtype;
      ys[k][p].shape = a.shape;
      ys[k][p].bytes.assign(std::size_t(numel(a.shape)) * dtype_size(a.dtype), 0);
    }
  for (std::int64_t step = 0; step < s.length; ++step) {
    const std::int64_t i = s.reverse ? s.length - 1 - step : step;
    std::vector<PerDevice> args = consts;
    args.insert(args.end(), carry.begin(), carry.end());
    for (size_t k = 0; k < q; ++k) {
      PerDevice slices(np);
      for (size_t p = 0; p < np; ++p) {
        const HostArray& x = (*in[c + m + k])[p].at(0);
        HostArray sl;
        sl.dtype = x.dtype;
        sl.shape.assign(x.shape.begin() + 1, x.shape.end());
        const std::size_t bytes = std::size_t(numel(sl.shape)) * dtype_size(x.dtype);
        sl.bytes.assign(x.bytes.begin() + std::ptrdiff_t(std::size_t(i) * bytes),
                        x.bytes.begin() + std::ptrdiff_t(std::size_t(i + 1) * bytes));
        slices[p].push_back(std::move(sl));
      }
      args.push_back(std::move(slices));
    }
    auto outs = run_graph(body, std::move(args));
    for (size_t k = 0; k < m; ++k) carry[k] = std::move(outs[k]);
    for (size_t k = 0; k < ny; ++k)
      for (size_t p = 0; p < np; ++p) {
        const HostArray& y = outs[m + k][p].at(0);
        std::memcpy(ys[k][p].bytes.data() + std::size_t(i) * y.bytes.size(), y.bytes.data(), y.bytes.size());
      }
  }
  for (size_t p = 0; p < np; ++p) {
    for (size_t k = 0; k < m; ++k) result[p].push_back(carry[k][p].at(0));
    for (size_t k = 0; k < ny; ++k) result[p].push_back(std::move(ys[k][p]));
  }
  return result;
}

// ------------------------------------------------------------------ the table

namespace {
template <Op op>
constexpr ControlRules control_entry() {
  if constexpr (is_control_flow(op))
    return {&ControlRule<op>::boundary, &ControlRule<op>::typing, &ControlRule<op>::run};
  else
    return {nullptr, nullptr, nullptr};
}
const ControlRules kControlRules[] = {
#define TESSEL_X(e, text, family, cost_class, attrs) control_entry<Op::e>(),
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
}  // namespace

const ControlRules& control_rules(Op op) {
  const ControlRules& r = kControlRules[int(op)];
  if (!r.boundary) throw InternalError(detail::cat(op_name(op), " is not control flow"));
  return r;
}

}  // namespace tessel
