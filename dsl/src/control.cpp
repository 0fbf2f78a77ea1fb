// lax.cond / switch / while_loop / scan: each function traced into a region
// (its own trace: arrays it closes over become operands of the primitive),
// checked as JAX checks, and applied as one cond, while or scan node.
#include <tessel/lax.hpp>

#include <tessel/creation.hpp>
#include <tessel/ops.hpp>

#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::lax::detail {

using tessel::detail::cat;

namespace {

// A function traced on fresh inputs: its graph (parameters: the inputs,
// then what it closed over) and its trace (whose table may take more nodes).
using TracedFn = tessel::detail::TracedGraph;

TracedFn trace_fn(const std::string& name, const Fn& fn, const std::vector<Aval>& in) {
  return tessel::detail::trace_graph(name, in, fn);
}

Aval param_aval(const TracedFn& f, size_t k) { return f.g.params[k]->aval; }

// A carry as traced: weakly typed where its init is (JAX's), so that the
// body's result may promote it (promote_weak_carries).
Aval carry_aval(const Array& x) { return Aval{x.dtype(), x.shape(), x.weak_type()}; }

std::string avals_str(const std::vector<NodeRef>& xs) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < xs.size(); ++i) os << (i ? ", " : "") << xs[i]->aval.str();
  os << ']';
  return os.str();
}

std::vector<Aval> captured_avals(const TracedFn& f, size_t explicit_count) {
  std::vector<Aval> out;
  for (size_t k = explicit_count; k < f.g.params.size(); ++k) out.push_back(param_aval(f, k));
  return out;
}

// The region of f with the arrays it closed over as its leading parameters,
// then its explicit inputs (the layout of while and scan regions).
GraphRef region(const TracedFn& f, size_t explicit_count) {
  std::vector<Aval> avals = captured_avals(f, explicit_count);
  const size_t lead = avals.size();
  std::vector<int> pos;
  for (size_t i = 0; i < explicit_count; ++i) {
    avals.push_back(param_aval(f, i));
    pos.push_back(int(lead + i));
  }
  for (size_t j = 0; j < lead; ++j) pos.push_back(int(j));
  return reparameterize(f.g, avals, pos);
}

// Where a carry's output type differs from its input's only because the
// input was weakly typed (a C++ scalar), JAX retraces with the input
// promoted to the output's dtype: returns true (and fixes init) then.
bool promote_weak_carries(std::vector<Array>& init, const std::vector<NodeRef>& outs, size_t offset) {
  bool changed = false;
  for (size_t k = 0; k < init.size(); ++k) {
    const Aval& o = outs.at(offset + k)->aval;
    if (init[k].weak_type() && o.dtype != init[k].dtype() && o.shape == init[k].shape()) {
      init[k] = init[k].astype(o.dtype);
      changed = true;
    }
  }
  return changed;
}

// The carry's output types must equal its input's (JAX's _check_carry_type).
void check_carry(const char* what, const char* fn, const std::vector<Array>& init, const std::vector<NodeRef>& outs,
                 size_t offset, const std::string& structure) {
  for (size_t k = 0; k < init.size(); ++k) {
    const Aval& o = outs.at(offset + k)->aval;
    if (o.dtype != init[k].dtype() || o.shape != init[k].shape())
      throw TypeError(cat(what, ": ", fn, " output and input must have identical types: the input carry component [", k,
                          "] of ", structure, " has type ", Aval{init[k].dtype(), init[k].shape(), false}.str(),
                          " but the corresponding output carry component has type ", o.str(),
                          o.dtype != init[k].dtype() ? ", so the dtype of the output carry differs"
                                                     : ", so the shape of the output carry differs"));
  }
}

Array as_index(const char* what, const Array& index, size_t branches) {
  if (index.ndim() != 0)
    throw TypeError(cat(what, ": the ", branches == 2 && std::string(what) == "cond" ? "predicate" : "branch index",
                        " must be a scalar, got ", aval_str(index.dtype(), index.shape())));
  if (std::string(what) == "cond") {
    if (index.dtype() == DType::bool_) return index.astype(DType::int32);
    if (!is_integral(index.dtype()))
      throw TypeError(cat("cond: Pred type must be either boolean or number, got ", aval_str(index.dtype(), index.shape())));
    return (index != 0).astype(DType::int32);
  }
  if (!is_integral(index.dtype()))
    throw TypeError(cat("switch: the branch index must be an integer scalar, got ", aval_str(index.dtype(), index.shape())));
  // Clamped by the primitive; a wide index is clamped here first so it fits int32.
  if (index.dtype() == DType::int32) return index;
  return clip(index, 0.0, double(branches) - 1).astype(DType::int32);
}

}  // namespace

[[noreturn]] void scalar_carry(const char* what) {
  throw TypeError(cat("lax.", what, ": a C++ scalar leaf cannot hold a traced value; make every leaf of operands, "
                      "carries and xs a ts::Array (a 0-d array for a scalar)"));
}

[[noreturn]] void structure_changed(const char* what, const std::string& in, const std::string& out) {
  throw TypeError(cat(what, ": the output must have the structure of the input: ", in, " in, ", out, " out"));
}

Array loop_index(std::int64_t v) { return tessel::detail::scalar_array_i64(v, DType::int32, false); }

std::vector<Array> cond_call(const char* what, const Array& index, const std::vector<Fn>& branches,
                             const std::vector<Array>& operands) {
  if (branches.empty()) throw ValueError(cat(what, ": no branches given"));
  Array idx = as_index(what, index, branches.size());
  std::vector<Aval> in;
  for (auto& x : operands) in.push_back(Aval{x.dtype(), x.shape(), x.weak_type()});
  std::vector<TracedFn> traced;
  for (size_t b = 0; b < branches.size(); ++b)
    traced.push_back(trace_fn(cat(what, "_branch_", b), branches[b], in));
  // Outputs must agree; a weakly typed one takes another branch's dtype.
  const size_t no = traced[0].g.outputs.size();
  auto mismatch = [&](size_t b) {
    if (std::string(what) == "cond")
      throw TypeError(cat("cond: true_fun and false_fun output must have identical types, got ",
                          avals_str(traced[1].g.outputs), " and ", avals_str(traced[0].g.outputs)));
    throw TypeError(cat("switch: branch 0 and ", b, " outputs must have identical types, got ",
                        avals_str(traced[0].g.outputs), " and ", avals_str(traced[b].g.outputs)));
  };
  for (size_t b = 1; b < traced.size(); ++b)
    if (traced[b].g.outputs.size() != no) mismatch(b);
  for (size_t k = 0; k < no; ++k) {
    // The dtype of a strongly typed output, if any branch has one.
    std::optional<DType> want;
    for (auto& t : traced)
      if (!t.g.outputs[k]->aval.weak_type) want = t.g.outputs[k]->dtype();
    for (size_t b = 0; b < traced.size(); ++b) {
      NodeRef& o = traced[b].g.outputs[k];
      if (want && o->aval.weak_type && o->dtype() != *want) o = build::convert(traced[b].trace->table, o, *want);
    }
    for (size_t b = 1; b < traced.size(); ++b) {
      const Aval &a = traced[0].g.outputs[k]->aval, &c = traced[b].g.outputs[k]->aval;
      if (a.dtype != c.dtype || a.shape != c.shape) mismatch(b);
    }
  }
  // Operands: the index, the explicit ones, every branch's captured arrays.
  std::vector<Aval> caps;
  std::vector<Array> all{idx};
  all.insert(all.end(), operands.begin(), operands.end());
  std::vector<size_t> cap_at;
  for (auto& t : traced) {
    cap_at.push_back(caps.size());
    auto c = captured_avals(t, operands.size());
    caps.insert(caps.end(), c.begin(), c.end());
    all.insert(all.end(), t.trace->captured.begin(), t.trace->captured.end());
  }
  // Region params: the explicit operands, then every captured array.
  std::vector<GraphRef> regions;
  for (size_t b = 0; b < traced.size(); ++b) {
    std::vector<Aval> avals = in;
    avals.insert(avals.end(), caps.begin(), caps.end());
    std::vector<int> pos;
    for (size_t i = 0; i < operands.size(); ++i) pos.push_back(int(i));
    for (size_t j = operands.size(); j < traced[b].g.params.size(); ++j)
      pos.push_back(int(operands.size() + cap_at[b] + j - operands.size()));
    regions.push_back(reparameterize(traced[b].g, avals, pos));  // keeps the name
  }
  return tessel::detail::apply_region(what, all, tessel::detail::any_effects(regions),
                                     [&](NodeTable& t, const std::vector<NodeRef>& ns) {
                                       std::vector<NodeRef> ops(ns.begin() + 1, ns.end());
                                       return build::cond(t, ns[0], regions, ops);
                                     });
}

std::vector<Array> while_call(const char* what, const Fn& cond_fn, const Fn& body_fn, const std::vector<Array>& init_in,
                              const std::string& structure) {
  std::vector<Array> init = init_in;
  for (int attempt = 0;; ++attempt) {
    std::vector<Aval> carry;
    for (auto& x : init) carry.push_back(carry_aval(x));
    TracedFn c = trace_fn("cond_fun", cond_fn, carry);
    if (c.g.outputs.size() != 1 || c.g.outputs[0]->dtype() != DType::bool_ || c.g.outputs[0]->rank() != 0)
      throw TypeError(cat(what, ": cond_fun must return a boolean scalar, but got output type(s) ", avals_str(c.g.outputs)));
    TracedFn b = trace_fn("body_fun", body_fn, carry);
    if (b.g.outputs.size() != init.size()) structure_changed(what, structure, cat(b.g.outputs.size(), " leaves"));
    if (attempt == 0 && promote_weak_carries(init, b.g.outputs, 0)) continue;
    check_carry(what, "body_fun", init, b.g.outputs, 0, structure);
    const size_t m = init.size();
    std::vector<Aval> ccaps = captured_avals(c, m), bcaps = captured_avals(b, m);
    attr::While w;
    w.cond_consts = std::int64_t(ccaps.size());
    w.body_consts = std::int64_t(bcaps.size());
    w.cond = region(c, m);
    w.body = region(b, m);
    std::vector<Array> all = c.trace->captured;
    all.insert(all.end(), b.trace->captured.begin(), b.trace->captured.end());
    all.insert(all.end(), init.begin(), init.end());
    return tessel::detail::apply_region(what, all, tessel::detail::any_effects({w.cond, w.body}),
                                       [&](NodeTable& t, const std::vector<NodeRef>& ns) { return build::while_loop(t, w, ns); });
  }
}

std::vector<Array> scan_call(const Fn& f, const std::vector<Array>& init_in, const std::vector<Array>& xs,
                             const ScanOptions& opt, const std::string& structure) {
  std::optional<std::int64_t> length = opt.length;
  for (auto& x : xs) {
    if (x.ndim() == 0)
      throw ValueError(cat("scan got value with no leading axis to scan over: ", aval_str(x.dtype(), x.shape())));
    if (opt.length && x.shape()[0] != *opt.length)
      throw ValueError(cat("scan got `length` argument of ", *opt.length, " which disagrees with leading axis sizes [",
                           x.shape()[0], "]"));
    if (length && x.shape()[0] != *length)
      throw ValueError(cat("scan got values with different leading axis sizes: ", *length, ", ", x.shape()[0]));
    length = x.shape()[0];
  }
  if (!length) throw ValueError("scan got no values to scan over and `length` not provided");
  if (*length < 0) throw ValueError(cat("scan: length ", *length, " is negative"));
  std::vector<Array> init = init_in;
  for (int attempt = 0;; ++attempt) {
    std::vector<Aval> in;
    for (auto& x : init) in.push_back(carry_aval(x));
    for (auto& x : xs) {
      Aval a = carry_aval(x);
      a.shape.erase(a.shape.begin());
      in.push_back(a);
    }
    TracedFn b = trace_fn("scan_body", f, in);
    const size_t m = init.size(), q = xs.size();
    if (b.g.outputs.size() < m) structure_changed("scan", structure, cat(b.g.outputs.size(), " leaves"));
    if (attempt == 0 && promote_weak_carries(init, b.g.outputs, 0)) continue;
    check_carry("scan", "body function carry", init, b.g.outputs, 0, structure);
    std::vector<Aval> caps = captured_avals(b, m + q);
    attr::Scan s;
    s.body = region(b, m + q);
    s.length = *length;
    s.consts = std::int64_t(caps.size());
    s.carries = std::int64_t(m);
    s.reverse = opt.reverse;
    std::vector<Array> all = b.trace->captured;
    all.insert(all.end(), init.begin(), init.end());
    all.insert(all.end(), xs.begin(), xs.end());
    return tessel::detail::apply_region("scan", all, tessel::detail::any_effects({s.body}),
                                       [&](NodeTable& t, const std::vector<NodeRef>& ns) { return build::scan(t, s, ns); });
  }
}

}  // namespace tessel::lax::detail
