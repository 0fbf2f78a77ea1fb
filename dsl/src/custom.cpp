// ts::custom_jvp, ts::custom_vjp and ts::remat over leaves
// (dsl/tessel/custom.hpp and remat.hpp have the typed front ends): each function traced into a region, checked as JAX
// checks a custom rule's results, and applied as one custom_jvp_call or
// custom_vjp_call node (tracer/rules_custom.cpp has their rules). Arrays a
// function closes over become operands of the node, constants to the rules:
// no derivative flows to them.
#include <tessel/custom.hpp>
#include <tessel/remat.hpp>

#include <sstream>

#include "dsl/src/trace.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel::detail {

namespace {

Aval aval_of(const Array& x) { return Aval{x.dtype(), x.shape(), x.weak_type()}; }
Aval tangent_aval(const Array& x) { return Aval{x.dtype(), x.shape(), false}; }

std::string avals_str(const std::vector<NodeRef>& xs, std::size_t from, std::size_t to) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = from; i < to; ++i) os << (i > from ? ", " : "") << xs[i]->aval.str();
  os << ']';
  return os.str();
}

bool same_type(const Aval& a, const Aval& b) { return a.dtype == b.dtype && a.shape == b.shape && !a.tuple && !b.tuple; }

void no_effects(const char* what, const TracedGraph& f) {
  if (!f.g.effects.empty())
    throw ValueError(cat(what, ": ts::debug::print and ts::debug::callback are not supported inside a custom "
                               "derivative rule (they run in the function itself)"));
}

// The operands: the explicit arguments, then each traced function's
// captured arrays, in order.
struct Operands {
  std::vector<Array> arrays;
  std::vector<std::size_t> caps_at;  // per traced function, the index of its first captured array
};

Operands gather(const std::vector<Array>& args, const std::vector<const TracedGraph*>& fns,
                const std::vector<std::size_t>& explicit_counts) {
  Operands o;
  o.arrays = args;
  for (std::size_t f = 0; f < fns.size(); ++f) {
    o.caps_at.push_back(o.arrays.size());
    const auto& caps = fns[f]->trace->captured;
    TESSEL_CHECK_INTERNAL(fns[f]->g.params.size() == explicit_counts[f] + caps.size(), "captured count");
    o.arrays.insert(o.arrays.end(), caps.begin(), caps.end());
  }
  return o;
}

// f's graph over `copies` blocks of all operands (avals `block`): its
// explicit parameter block b, position i, at b * N + i; its captured ones at
// their operand positions in block 0.
GraphRef region(const TracedGraph& f, const std::vector<Aval>& block, std::size_t copies, std::size_t n_explicit,
                std::size_t caps_at) {
  std::vector<Aval> avals;
  for (std::size_t c = 0; c < copies; ++c) avals.insert(avals.end(), block.begin(), block.end());
  std::vector<int> pos;
  const std::size_t N = block.size(), per = n_explicit;
  for (std::size_t c = 0; c < copies; ++c)
    for (std::size_t i = 0; i < per; ++i) pos.push_back(int(c * N + i));
  for (std::size_t j = copies * per; j < f.g.params.size(); ++j) pos.push_back(int(caps_at + (j - copies * per)));
  return reparameterize(f.g, avals, pos);
}

std::vector<std::int64_t> nondiff_operands(const std::vector<std::int64_t>& nondiff_leaves, std::size_t n,
                                           std::size_t total) {
  std::vector<std::int64_t> out;
  for (auto k : nondiff_leaves)
    if (k >= 0 && std::size_t(k) < n) out.push_back(k);
  for (std::size_t k = n; k < total; ++k) out.push_back(std::int64_t(k));  // captured: constants
  return out;
}

}  // namespace

std::vector<Array> custom_jvp_call(const std::string& name, const LeafFn& fun, const LeafFn& jvp,
                                   const std::vector<Array>& args, const std::vector<std::int64_t>& nondiff) {
  const std::size_t n = args.size();
  std::vector<Aval> in, in2;
  for (auto& x : args) in.push_back(aval_of(x));
  in2 = in;
  for (auto& x : args) in2.push_back(tangent_aval(x));
  TracedGraph f = trace_graph(name, in, fun);
  TracedGraph j = trace_graph("jvp(" + name + ")", in2, jvp);
  no_effects("custom_jvp", j);
  const std::size_t m = f.g.outputs.size();
  if (j.g.outputs.size() != 2 * m)
    throw TypeError(cat("Custom JVP rule must produce a pair (list or tuple of length two) of primal and tangent "
                        "outputs with the structure of the function's output: the function ",
                        name, " has ", m, " output leaves, the rule gave ", j.g.outputs.size(), " in all"));
  for (std::size_t k = 0; k < m; ++k) {
    if (!same_type(j.g.outputs[k]->aval, f.g.outputs[k]->aval))
      throw TypeError(cat("Custom JVP rule must produce primal outputs with the same shapes and dtypes as the "
                          "function: the function gives ", avals_str(f.g.outputs, 0, m), ", the rule ",
                          avals_str(j.g.outputs, 0, m)));
    if (!same_type(j.g.outputs[m + k]->aval, f.g.outputs[k]->aval))
      throw TypeError(cat("Custom JVP rule must produce primal and tangent outputs with corresponding shapes and "
                          "dtypes, but got primal outputs ", avals_str(j.g.outputs, 0, m), " and tangent outputs ",
                          avals_str(j.g.outputs, m, 2 * m)));
  }
  Operands o = gather(args, {&f, &j}, {n, 2 * n});
  std::vector<Aval> block;
  for (auto& x : o.arrays) block.push_back(aval_of(x));
  attr::CustomJvp a;
  a.fun = region(f, block, 1, n, o.caps_at[0]);
  a.jvp = region(j, block, 2, n, o.caps_at[1]);
  // The rule's tangent block holds the operands' tangents (non-weak avals).
  a.nondiff = nondiff_operands(nondiff, n, o.arrays.size());
  return apply_region(name, o.arrays, any_effects({a.fun}), [&](NodeTable& t, const std::vector<NodeRef>& ns) {
    return build::custom_jvp_call(t, a, ns);
  });
}

std::vector<Array> custom_vjp_call(const std::string& name, const LeafFn& fun, const LeafFn& fwd, const BwdFn& bwd,
                                   const std::vector<Array>& args, const std::vector<std::int64_t>& nondiff) {
  const std::size_t n = args.size();
  std::vector<Aval> in;
  for (auto& x : args) in.push_back(aval_of(x));
  TracedGraph f = trace_graph(name, in, fun);
  TracedGraph fw = trace_graph("fwd(" + name + ")", in, fwd);
  no_effects("custom_vjp", fw);
  const std::size_t m = f.g.outputs.size();
  if (fw.g.outputs.size() < m)
    throw TypeError(cat("Custom VJP fwd rule must produce a pair (list or tuple of length two) where the first "
                        "element represents the primal output: ", name, " has ", m, " output leaves, fwd gave ",
                        fw.g.outputs.size(), " in all"));
  for (std::size_t k = 0; k < m; ++k)
    if (!same_type(fw.g.outputs[k]->aval, f.g.outputs[k]->aval))
      throw TypeError(cat("Custom VJP fwd rule must produce primal outputs with the same shapes and dtypes as the "
                          "function: the function gives ", avals_str(f.g.outputs, 0, m), ", fwd ",
                          avals_str(fw.g.outputs, 0, m)));
  const std::size_t r = fw.g.outputs.size() - m;
  // bwd(residuals, cotangents of the results) -> cotangents of the arguments.
  std::vector<Aval> bin;
  for (std::size_t k = m; k < m + r; ++k) bin.push_back(fw.g.outputs[k]->aval);
  for (std::size_t k = 0; k < m; ++k) {
    Aval c = f.g.outputs[k]->aval;
    c.weak_type = false;
    bin.push_back(c);
  }
  // JAX traces bwd only under reverse mode, so an error in it (or in its
  // results) is raised there: kept in the node until the rule is used.
  attr::CustomVjp a;
  TracedGraph bw;
  try {
    bw = trace_graph("bwd(" + name + ")", bin, [&](const std::vector<Array>& xs) {
      return bwd(std::vector<Array>(xs.begin(), xs.begin() + std::ptrdiff_t(r)),
                 std::vector<Array>(xs.begin() + std::ptrdiff_t(r), xs.end()));
    });
    no_effects("custom_vjp", bw);
    if (bw.g.outputs.size() != n)
      throw TypeError(cat("Custom VJP bwd rule must produce an output with the same container (pytree) structure "
                          "as the args tuple of the primal function: ", n, " array leaves in the arguments, bwd gave ",
                          bw.g.outputs.size()));
    for (std::size_t k = 0; k < n; ++k)
      if (bw.g.outputs[k]->aval.shape != in[k].shape)
        throw ValueError(cat("Custom VJP bwd rule must produce an output with the same shape/dtypes as the args "
                             "tuple of the primal function: argument leaf ", k, " is ",
                             Aval{in[k].dtype, in[k].shape, false}.str(), ", bwd gave ", bw.g.outputs[k]->aval.str()));
  } catch (const TypeError& e) {
    a.bwd_error = e.what(), a.bwd_error_kind = 1;
  } catch (const ValueError& e) {
    a.bwd_error = e.what(), a.bwd_error_kind = 2;
  } catch (const ShapeError& e) {
    a.bwd_error = e.what(), a.bwd_error_kind = 3;
  } catch (const Error& e) {
    a.bwd_error = e.what(), a.bwd_error_kind = 4;
  }
  const bool have_bwd = a.bwd_error_kind == 0;
  std::vector<const TracedGraph*> fns = {&f, &fw};
  std::vector<std::size_t> counts = {n, n};
  if (have_bwd) fns.push_back(&bw), counts.push_back(r + m);
  Operands o = gather(args, fns, counts);
  std::vector<Aval> block;
  for (auto& x : o.arrays) block.push_back(aval_of(x));
  const std::size_t c = have_bwd ? bw.trace->captured.size() : 0;  // arrays bwd closes over: passed on as residuals
  a.fun = region(f, block, 1, n, o.caps_at[0]);
  {
    // fwd, then bwd's captured operands as further residuals.
    auto g = std::make_shared<Graph>(*region(fw, block, 1, n, o.caps_at[1]));
    for (std::size_t j = 0; j < c; ++j) g->outputs.push_back(g->params[o.caps_at[2] + j]);
    a.fwd = g;
  }
  // bwd over (residuals, its captured arrays, cotangents) -> a cotangent per
  // operand: the captured operands get zeros (constants to the rule).
  if (have_bwd) {
    std::vector<Aval> avals(bin.begin(), bin.begin() + std::ptrdiff_t(r));
    for (std::size_t j = 0; j < c; ++j) avals.push_back(block[o.caps_at[2] + j]);
    avals.insert(avals.end(), bin.begin() + std::ptrdiff_t(r), bin.end());
    NodeTable t;
    auto g = std::make_shared<Graph>();
    g->name = bw.g.name;
    for (std::size_t i = 0; i < avals.size(); ++i) g->params.push_back(build::parameter(t, int(i), avals[i]));
    // bw's parameters: its residuals, the cotangents, then what it captured.
    std::vector<NodeRef> args(g->params.begin(), g->params.begin() + std::ptrdiff_t(r));
    args.insert(args.end(), g->params.begin() + std::ptrdiff_t(r + c), g->params.end());
    args.insert(args.end(), g->params.begin() + std::ptrdiff_t(r), g->params.begin() + std::ptrdiff_t(r + c));
    g->outputs = inline_graph(t, bw.g, args);
    for (std::size_t k = 0; k < n; ++k)
      if (g->outputs[k]->dtype() != in[k].dtype) g->outputs[k] = build::convert(t, g->outputs[k], in[k].dtype);
    for (std::size_t k = n; k < o.arrays.size(); ++k) g->outputs.push_back(ad::zeros(t, block[k]));
    a.bwd = g;
  }
  a.nondiff = nondiff_operands(nondiff, n, o.arrays.size());
  return apply_region(name, o.arrays, any_effects({a.fun}), [&](NodeTable& t, const std::vector<NodeRef>& ns) {
    return build::custom_vjp_call(t, a, ns);
  });
}

std::vector<Array> remat_call(const std::string& name, const LeafFn& fun, const std::vector<Array>& args,
                              const RematOptions& options) {
  std::vector<Aval> in;
  for (auto& x : args) in.push_back(aval_of(x));
  TracedGraph f = trace_graph(name, in, fun);
  // Arrays f closes over are operands too: derivatives flow to them (JAX
  // converts checkpoint's closures the same way).
  Operands o = gather(args, {&f}, {args.size()});
  std::vector<Aval> block;
  for (auto& x : o.arrays) block.push_back(aval_of(x));
  attr::Remat a;
  a.fun = region(f, block, 1, args.size(), o.caps_at[0]);
  a.policy = std::int64_t(options.policy.kind);
  a.names = options.policy.names;
  a.prevent_cse = options.prevent_cse;
  return apply_region(name, o.arrays, any_effects({a.fun}), [&](NodeTable& t, const std::vector<NodeRef>& ns) {
    return build::remat_call(t, a, ns);
  });
}

}  // namespace tessel::detail

namespace tessel {

Array checkpoint_name(const Array& x, const std::string& name) {
  return detail::apply1("tessel.checkpoint_name", {x},
                        [&](NodeTable& t, const std::vector<NodeRef>& in) { return build::checkpoint_name(t, in[0], name); });
}

}  // namespace tessel
