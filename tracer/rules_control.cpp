// Rules of the control-flow ops: cond (lax.cond, lax.switch), while_
// (lax.while_loop) and scan (lax.scan). Each is a region op whose results
// are a tuple.
//
// The reference interpreter runs them (tracer/interpreter.cpp), the
// partitioner partitions their regions as programs of their own
// (tracer/partition.cpp) and codegen runs each region as an executable of
// its own (codegen/compile.cpp); what sits here is their typing and their
// derivatives.
//
// Derivatives, as JAX's: the JVP of each is the same op over the JVP of its
// regions (float carries of a loop carry their tangents too). The JVP of a
// scan is split so that it transposes: a scan of the primal body that also
// stacks the carries each step starts from (the residuals), and a scan of
// the tangent body that reads them; its transpose is a scan in the other
// direction over the body's VJP, accumulating the cotangents of the
// constants in its carries. A while loop has no transpose (JAX's error).
#include <algorithm>

#include "tracer/autodiff.hpp"
#include "tracer/batching.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;

namespace {

bool same_type(const Aval& a, const Aval& b) { return !a.tuple && !b.tuple && a.dtype == b.dtype && a.shape == b.shape; }

Aval strong(Aval a) {
  a.weak_type = false;
  return a;
}

std::vector<Aval> avals_of(const std::vector<NodeRef>& xs) {
  std::vector<Aval> out;
  for (auto& x : xs) out.push_back(strong(x->aval));
  return out;
}

// g's parameters must take `in` and (when given) its outputs give `out`.
void check_region(const char* op, const char* what, const Graph& g, const std::vector<Aval>& in,
                  const std::vector<Aval>* out) {
  if (g.params.size() != in.size())
    throw InternalError(cat(op, ": ", what, " takes ", g.params.size(), " parameters, given ", in.size()));
  for (size_t k = 0; k < in.size(); ++k)
    if (!same_type(g.params[k]->aval, in[k]))
      throw InternalError(cat(op, ": ", what, " parameter ", k, " is ", g.params[k]->aval.str(), ", given ", in[k].str()));
  if (!out) return;
  if (g.outputs.size() != out->size())
    throw InternalError(cat(op, ": ", what, " returns ", g.outputs.size(), " values, expected ", out->size()));
  for (size_t k = 0; k < out->size(); ++k)
    if (!same_type(g.outputs[k]->aval, (*out)[k]))
      throw InternalError(cat(op, ": ", what, " result ", k, " is ", g.outputs[k]->aval.str(), ", expected ",
                              (*out)[k].str()));
}

[[noreturn]] void by_interpreter(Op op) {
  throw InternalError(cat(op_name(op), " is run by the interpreter and partitioned by the partitioner, not by its rules"));
}

}  // namespace

// Evaluation, factor and partition rules: the interpreter runs the op by its
// ControlRule (tracer/control_rules.hpp), propagation settles its boundary by it, the partitioner
// partitions its regions (emit_control).
#define TESSEL_CONTROL_ELSEWHERE(OP)                                                                             \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {             \
    by_interpreter(Op::OP);                                                                                      \
  }                                                                                                              \
  FactorRule Rule<Op::OP>::factors(const Node&) { by_interpreter(Op::OP); }                                      \
  NodeRef Rule<Op::OP>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,                           \
                              const std::vector<AxisSharding>&, const AxisSharding&) {                           \
    by_interpreter(Op::OP);                                                                                      \
  }
TESSEL_CONTROL_ELSEWHERE(cond)
TESSEL_CONTROL_ELSEWHERE(while_)
TESSEL_CONTROL_ELSEWHERE(scan)
#undef TESSEL_CONTROL_ELSEWHERE

namespace {

std::vector<NodeRef> slice_of(const std::vector<NodeRef>& v, size_t from, size_t count) {
  return std::vector<NodeRef>(v.begin() + std::ptrdiff_t(from), v.begin() + std::ptrdiff_t(from + count));
}

// A region's JVP with its parameters reordered: jvp_graph gives params
// (primals..., tangents of wrt...) and outputs (primals..., tangents...);
// `order` lists, for each new parameter, (false, i) for primal i or (true, i)
// for the tangent of primal i; `outs` likewise for the outputs.
GraphRef jvp_region(const Graph& g, const std::vector<bool>& wrt, const std::vector<std::pair<bool, int>>& order,
                    const std::vector<std::pair<bool, int>>& outs, const std::string& name) {
  Graph j = jvp_graph(g, wrt);
  const int np = int(g.params.size()), no = int(g.outputs.size());
  // Where each tangent param sits in j.params.
  std::vector<int> tangent_pos(size_t(np), -1);
  int next = np;
  for (int i = 0; i < np; ++i)
    if (wrt[size_t(i)] && is_inexact(g.params[size_t(i)]->dtype())) tangent_pos[size_t(i)] = next++;
  std::vector<Aval> avals;
  std::vector<int> pos(j.params.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    auto [tan, i] = order[k];
    const int src = tan ? tangent_pos[size_t(i)] : i;
    TESSEL_CHECK_INTERNAL(src >= 0, "jvp_region: no tangent for parameter ", i);
    avals.push_back(strong(j.params[size_t(src)]->aval));
    pos[size_t(src)] = int(k);
  }
  // Parameters left out (none, by construction) would be unbound.
  for (int p : pos) TESSEL_CHECK_INTERNAL(p >= 0, "jvp_region: a parameter is left out");
  std::vector<int> out_idx;
  for (auto [tan, i] : outs) out_idx.push_back(tan ? no + i : i);
  auto r = reparameterize(j, avals, pos, out_idx);
  auto named = std::make_shared<Graph>(*r);
  named->name = name;
  named->effects.clear();  // the primal region op (kept beside this one) runs them
  return named;
}

}  // namespace

// ------------------------------------------------------------------ cond

Aval Rule<Op::cond>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (p.branches.empty()) throw InternalError("cond without branches");
  if (in.empty() || in[0].tuple || in[0].dtype != DType::int32 || !in[0].shape.empty())
    throw TypeError(cat("cond: the branch index must be an int32 scalar, got ", in.empty() ? "nothing" : in[0].str()));
  std::vector<Aval> ops(in.begin() + 1, in.end());
  std::vector<Aval> outs;
  for (auto& o : p.branches[0]->outputs) outs.push_back(strong(o->aval));
  for (size_t b = 0; b < p.branches.size(); ++b) check_region("cond", "a branch", *p.branches[b], ops, &outs);
  return Aval::make_tuple(std::move(outs));
}

// JVP: the same cond over the operands and their tangents, each branch its JVP.
NodeRef Rule<Op::cond>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  const auto& branches = attrs_of(n).branches;
  const int m = int(x.size()) - 1, no = int(n.aval.elements.size());
  std::vector<bool> wrt(size_t(m), false);
  std::vector<NodeRef> ops(x.begin() + 1, x.end());
  std::vector<std::pair<bool, int>> order, outs;
  for (int i = 0; i < m; ++i) order.push_back({false, i});
  for (int i = 0; i < m; ++i)
    if (tx[size_t(i + 1)] && is_inexact(x[size_t(i + 1)]->dtype())) {
      wrt[size_t(i)] = true;
      order.push_back({true, i});
      ops.push_back(tx[size_t(i + 1)]);
    }
  if (std::none_of(wrt.begin(), wrt.end(), [](bool b) { return b; })) return nullptr;
  for (int k = 0; k < no; ++k) outs.push_back({true, k});
  std::vector<GraphRef> jb;
  for (auto& b : branches) jb.push_back(jvp_region(*b, wrt, order, outs, "jvp(" + b->name + ")"));
  return build::cond(t, x[0], std::move(jb), ops);  // a tuple of the results' tangents
}

// Transpose, with respect to the linear operands: a cond over each branch's
// VJP (linear operands entering as zeros, the output cotangents after them).
void Rule<Op::cond>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                               std::vector<NodeRef>& cts) {
  if (linear[0]) rule_util::not_linear(n);
  const int m = int(n.in.size()) - 1, no = int(n.aval.elements.size());
  std::vector<bool> wrt(linear.begin() + 1, linear.end());
  std::vector<int> lin;
  for (int i = 0; i < m; ++i)
    if (wrt[size_t(i)]) lin.push_back(i);
  if (lin.empty()) return;
  std::vector<GraphRef> tb;
  for (auto& b : attrs_of(n).branches) {
    Graph v = vjp_graph(*b, wrt);  // params: operands, output cts; outputs: results, then cts of the linear ones
    std::vector<Aval> avals = avals_of(v.params);
    std::vector<int> pos, outs;
    for (size_t k = 0; k < v.params.size(); ++k) pos.push_back(int(k));
    for (size_t k = 0; k < lin.size(); ++k) outs.push_back(no + int(k));
    auto g = std::make_shared<Graph>(*reparameterize(v, avals, pos, outs));
    g->name = "transpose(" + b->name + ")";
    g->effects.clear();  // the forward pass ran them; the transpose does not again
    tb.push_back(g);
  }
  std::vector<NodeRef> ops;
  for (int i = 0; i < m; ++i) ops.push_back(wrt[size_t(i)] ? ad::zeros(t, n.in[size_t(i + 1)]->aval) : n.in[size_t(i + 1)]);
  for (int k = 0; k < no; ++k) {
    NodeRef c = build::get_tuple_element(t, ct, k);
    ops.push_back(build::convert(t, c, n.aval.elements[size_t(k)].dtype));
  }
  auto r = build::results(t, build::cond(t, n.in[0], std::move(tb), ops));
  for (size_t k = 0; k < lin.size(); ++k) cts[size_t(lin[k] + 1)] = r.at(k);
}

// ------------------------------------------------------------------ while

Aval Rule<Op::while_>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.cond || !p.body) throw InternalError("while without a condition or a body");
  const size_t cc = size_t(p.cond_consts), bc = size_t(p.body_consts);
  if (cc + bc > in.size()) throw InternalError("while: more constants than operands");
  std::vector<Aval> carries;
  for (size_t k = cc + bc; k < in.size(); ++k) carries.push_back(strong(in[k]));
  std::vector<Aval> cin(in.begin(), in.begin() + std::ptrdiff_t(cc)), bin(in.begin() + std::ptrdiff_t(cc), in.begin() + std::ptrdiff_t(cc + bc));
  cin.insert(cin.end(), carries.begin(), carries.end());
  bin.insert(bin.end(), carries.begin(), carries.end());
  std::vector<Aval> pred{Aval{DType::bool_, {}, false}};
  check_region("while", "the condition", *p.cond, cin, &pred);
  check_region("while", "the body", *p.body, bin, &carries);
  return Aval::make_tuple(std::move(carries));
}

// JVP: one loop carrying the primal carries and the tangents of the float
// ones (zeros where none comes in); its body is the body's JVP, its
// condition the condition (tangents unused).
NodeRef Rule<Op::while_>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                              const NodeRef&) {
  const auto& w = attrs_of(n);
  const int cc = int(w.cond_consts), bc = int(w.body_consts), m = int(x.size()) - cc - bc;
  bool any = false;
  for (int k = cc; k < int(x.size()); ++k) any = any || (tx[size_t(k)] && is_inexact(x[size_t(k)]->dtype()));
  if (!any) return nullptr;
  // Body parameters: body consts, carries.
  std::vector<bool> wrt(size_t(bc + m), false);
  std::vector<std::pair<bool, int>> order, outs;
  std::vector<NodeRef> ops = slice_of(x, 0, size_t(cc + bc));
  for (int i = 0; i < bc; ++i) order.push_back({false, i});
  for (int i = 0; i < bc; ++i)
    if (tx[size_t(cc + i)] && is_inexact(x[size_t(cc + i)]->dtype())) {
      wrt[size_t(i)] = true;
      order.push_back({true, i});
      ops.push_back(tx[size_t(cc + i)]);
    }
  const int new_bc = int(order.size());
  std::vector<int> float_carries;
  for (int j = 0; j < m; ++j) {
    order.push_back({false, bc + j});
    outs.push_back({false, j});
    ops.push_back(x[size_t(cc + bc + j)]);
  }
  for (int j = 0; j < m; ++j) {
    const NodeRef& c = x[size_t(cc + bc + j)];
    if (!is_inexact(c->dtype())) continue;
    wrt[size_t(bc + j)] = true;
    float_carries.push_back(j);
    order.push_back({true, bc + j});
    outs.push_back({true, j});
    const NodeRef& tc = tx[size_t(cc + bc + j)];
    ops.push_back(tc ? tc : ad::zeros(t, strong(c->aval)));
  }
  attr::While jw;
  jw.cond_consts = cc;
  jw.body_consts = new_bc;
  jw.body = jvp_region(*w.body, wrt, order, outs, "jvp(" + w.body->name + ")");
  // The condition ignores the tangent carries.
  std::vector<Aval> cav;
  std::vector<int> cpos;
  for (int i = 0; i < cc; ++i) cav.push_back(strong(x[size_t(i)]->aval)), cpos.push_back(i);
  for (int j = 0; j < m; ++j) cav.push_back(strong(x[size_t(cc + bc + j)]->aval)), cpos.push_back(cc + j);
  for (int j : float_carries) cav.push_back(strong(x[size_t(cc + bc + j)]->aval));
  jw.cond = reparameterize(*w.cond, cav, cpos);
  {
    auto quiet = std::make_shared<Graph>(*jw.cond);
    quiet->effects.clear();  // the primal loop runs the condition's effects
    jw.cond = quiet;
  }
  auto r = build::results(t, build::while_loop(t, std::move(jw), ops));
  std::vector<NodeRef> tangents;
  size_t f = 0;
  for (int j = 0; j < m; ++j) {
    const Aval& a = n.aval.elements[size_t(j)];
    if (is_inexact(a.dtype)) tangents.push_back(r.at(size_t(m) + f++));
    else tangents.push_back(ad::zeros(t, a));
  }
  return build::tuple(t, tangents);
}
void Rule<Op::while_>::transpose(NodeTable&, const Node&, const NodeRef&, const std::vector<bool>&,
                                 std::vector<NodeRef>&) {
  throw ValueError(
      "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop values. "
      "Try using lax.scan, or using fori_loop with static start/stop.");
}

// ------------------------------------------------------------------ scan

namespace {
Aval unstacked(const Aval& a) {
  Aval s = strong(a);
  s.shape.erase(s.shape.begin());
  return s;
}
Aval stacked(const Aval& a, std::int64_t length) {
  Aval s = strong(a);
  s.shape.insert(s.shape.begin(), length);
  return s;
}
}  // namespace

Aval Rule<Op::scan>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.body) throw InternalError("scan without a body");
  const size_t c = size_t(p.consts), m = size_t(p.carries);
  if (c + m > in.size() || p.length < 0) throw InternalError("scan: bad operand counts or length");
  std::vector<Aval> bin, carries;
  for (size_t k = 0; k < c + m; ++k) bin.push_back(strong(in[k]));
  for (size_t k = c; k < c + m; ++k) carries.push_back(strong(in[k]));
  for (size_t k = c + m; k < in.size(); ++k) {
    if (in[k].tuple || in[k].shape.empty() || in[k].shape[0] != p.length)
      throw ShapeError(cat("scan: xs leaf ", k - c - m, " is ", in[k].str(), "; every leaf of xs needs a leading axis of "
                           "the scan's length ", p.length));
    bin.push_back(unstacked(in[k]));
  }
  const Graph& g = *p.body;
  check_region("scan", "the body", g, bin, nullptr);
  if (g.outputs.size() < m) throw InternalError("scan: the body returns fewer values than carries");
  std::vector<Aval> outs;
  for (size_t k = 0; k < m; ++k) {
    if (!same_type(g.outputs[k]->aval, carries[k]))
      throw InternalError(cat("scan: the body's carry ", k, " is ", g.outputs[k]->aval.str(), ", expected ", carries[k].str()));
    outs.push_back(carries[k]);
  }
  for (size_t k = m; k < g.outputs.size(); ++k) outs.push_back(stacked(g.outputs[k]->aval, p.length));
  return Aval::make_tuple(std::move(outs));
}

NodeRef Rule<Op::scan>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  const auto& s = attrs_of(n);
  const Graph& body = *s.body;
  const int c = int(s.consts), m = int(s.carries), q = int(x.size()) - c - m;
  const int ny = int(body.outputs.size()) - m;
  auto has_t = [&](int k) { return tx[size_t(k)] && is_inexact(x[size_t(k)]->dtype()); };
  bool any = false;
  for (int k = 0; k < int(x.size()); ++k) any = any || has_t(k);
  if (!any) return nullptr;
  // 1. The residuals: the primal scan also stacking the carries each step starts from.
  attr::Scan rs = s;
  {
    auto g = std::make_shared<Graph>(body);
    g->name = "residuals(" + body.name + ")";
    g->effects.clear();  // the primal scan (kept beside this one) runs them
    for (int j = 0; j < m; ++j) g->outputs.push_back(body.params[size_t(c + j)]);
    rs.body = g;
  }
  auto res = build::results(t, build::scan(t, rs, x));
  // 2. The tangent scan. Body params: consts, tangents of consts | tangent
  // carries (float) | carries (stacked residuals), xs, tangents of xs.
  std::vector<bool> wrt(body.params.size(), false);
  std::vector<std::pair<bool, int>> order, outs;
  std::vector<NodeRef> consts = slice_of(x, 0, size_t(c)), carries, xs;
  for (int i = 0; i < c; ++i) order.push_back({false, i});
  for (int i = 0; i < c; ++i)
    if (has_t(i)) wrt[size_t(i)] = true, order.push_back({true, i}), consts.push_back(tx[size_t(i)]);
  std::vector<int> float_carries;
  for (int j = 0; j < m; ++j) {
    const NodeRef& v = x[size_t(c + j)];
    if (!is_inexact(v->dtype())) continue;
    float_carries.push_back(j);
    wrt[size_t(c + j)] = true;
    order.push_back({true, c + j});
    outs.push_back({true, j});
    carries.push_back(tx[size_t(c + j)] ? tx[size_t(c + j)] : ad::zeros(t, strong(v->aval)));
  }
  for (int j = 0; j < m; ++j) order.push_back({false, c + j}), xs.push_back(res.at(size_t(m + ny + j)));
  for (int i = 0; i < q; ++i) order.push_back({false, c + m + i}), xs.push_back(x[size_t(c + m + i)]);
  for (int i = 0; i < q; ++i)
    if (has_t(c + m + i)) wrt[size_t(c + m + i)] = true, order.push_back({true, c + m + i}), xs.push_back(tx[size_t(c + m + i)]);
  for (int k = 0; k < ny; ++k) outs.push_back({true, m + k});
  attr::Scan ts = s;
  ts.consts = std::int64_t(consts.size());
  ts.carries = std::int64_t(carries.size());
  ts.body = jvp_region(body, wrt, order, outs, "jvp(" + body.name + ")");
  std::vector<NodeRef> ops = consts;
  ops.insert(ops.end(), carries.begin(), carries.end());
  ops.insert(ops.end(), xs.begin(), xs.end());
  auto r = build::results(t, build::scan(t, std::move(ts), ops));
  std::vector<NodeRef> tangents;
  size_t f = 0;
  for (int j = 0; j < m; ++j) {
    const Aval& a = n.aval.elements[size_t(j)];
    if (is_inexact(a.dtype)) tangents.push_back(r.at(f++));
    else tangents.push_back(ad::zeros(t, a));
  }
  for (int k = 0; k < ny; ++k) tangents.push_back(r.at(float_carries.size() + size_t(k)));
  return build::tuple(t, tangents);
}

// Transpose: every carry is linear (as JAX requires), constants and xs as
// `linear` says; a scan the other way over the body's VJP. Its carries: the
// carries' cotangents, then accumulated cotangents of the linear constants;
// its xs: the non-linear xs and the ys' cotangents; its ys: the linear xs'
// cotangents. Linear values enter the VJP as zeros (it is linear in them).
void Rule<Op::scan>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                               std::vector<NodeRef>& cts) {
  const auto& s = attrs_of(n);
  const Graph& body = *s.body;
  const int c = int(s.consts), m = int(s.carries), q = int(n.in.size()) - c - m;
  const int ny = int(body.outputs.size()) - m;
  std::vector<bool> wrt(body.params.size(), false);
  std::vector<int> lin_c, res_c, lin_x, res_x;
  for (int i = 0; i < c; ++i) (linear[size_t(i)] ? lin_c : res_c).push_back(i);
  for (int i = 0; i < q; ++i) (linear[size_t(c + m + i)] ? lin_x : res_x).push_back(i);
  for (int i : lin_c) wrt[size_t(i)] = true;
  for (int j = 0; j < m; ++j) wrt[size_t(c + j)] = true;
  for (int i : lin_x) wrt[size_t(c + m + i)] = true;
  // VJP params: body params (consts, carries, xs), then cts of carries' and ys;
  // outputs: body outputs, then cts of the wrt params in order (lin consts, carries, lin xs).
  Graph v = vjp_graph(body, wrt);
  // The transposed scan's parameters: consts = residual consts, then zeros
  // for linear consts, carries and linear x slices; carries = ct carries,
  // accumulators; xs = residual xs, ct ys.
  std::vector<Aval> av;
  std::vector<NodeRef> ops;
  std::vector<int> pos(v.params.size(), -1);
  auto add = [&](int vparam, const Aval& a, NodeRef op) {
    if (vparam >= 0) pos[size_t(vparam)] = int(av.size());
    av.push_back(strong(a));
    ops.push_back(std::move(op));
  };
  for (int i : res_c) add(i, body.params[size_t(i)]->aval, n.in[size_t(i)]);
  for (int i : lin_c) add(i, body.params[size_t(i)]->aval, ad::zeros(t, strong(body.params[size_t(i)]->aval)));
  for (int j = 0; j < m; ++j) add(c + j, body.params[size_t(c + j)]->aval, ad::zeros(t, strong(body.params[size_t(c + j)]->aval)));
  for (int i : lin_x)
    add(c + m + i, body.params[size_t(c + m + i)]->aval, ad::zeros(t, strong(body.params[size_t(c + m + i)]->aval)));
  const int t_consts = int(av.size());
  const int vp = int(body.params.size());
  for (int j = 0; j < m; ++j) {
    NodeRef cj = build::convert(t, build::get_tuple_element(t, ct, j), n.aval.elements[size_t(j)].dtype);
    add(vp + j, body.outputs[size_t(j)]->aval, cj);
  }
  for (int i : lin_c) add(-1, body.params[size_t(i)]->aval, ad::zeros(t, strong(body.params[size_t(i)]->aval)));
  const int t_carries = int(av.size()) - t_consts;
  for (int i : res_x) add(c + m + i, body.params[size_t(c + m + i)]->aval, n.in[size_t(c + m + i)]);
  for (int k = 0; k < ny; ++k) {
    NodeRef ck = build::convert(t, build::get_tuple_element(t, ct, m + k), n.aval.elements[size_t(m + k)].dtype);
    add(vp + m + k, body.outputs[size_t(m + k)]->aval, ck);
  }
  // (Stacked operands enter with their leading axis; `av` holds the slices the body sees.)
  for (int p : pos) TESSEL_CHECK_INTERNAL(p >= 0, "scan transpose: a parameter of the VJP is unbound");
  NodeTable u;
  auto g = std::make_shared<Graph>();
  g->name = "transpose(" + body.name + ")";
  for (size_t k = 0; k < av.size(); ++k) g->params.push_back(build::parameter(u, int(k), av[k]));
  std::vector<NodeRef> mapped;
  for (int p : pos) mapped.push_back(g->params[size_t(p)]);
  std::vector<NodeRef> forward_effects;  // the forward pass ran them; the transpose does not again
  const std::vector<NodeRef> vo = inline_graph(u, v, mapped, &forward_effects);
  auto vout = [&](int k) { return vo.at(size_t(m + ny + k)); };
  // Outputs: ct carries (the carries' cts), accumulators + lin consts' cts, then lin xs' cts.
  const int nl = int(lin_c.size());
  for (int j = 0; j < m; ++j) g->outputs.push_back(vout(nl + j));
  for (int k = 0; k < nl; ++k)
    g->outputs.push_back(ad::add(u, g->params[size_t(t_consts + m + k)], vout(k)));
  for (size_t k = 0; k < lin_x.size(); ++k) g->outputs.push_back(vout(nl + m + int(k)));
  attr::Scan tr;
  tr.body = g;
  tr.length = s.length;
  tr.consts = t_consts;
  tr.carries = t_carries;
  tr.reverse = !s.reverse;
  auto r = build::results(t, build::scan(t, std::move(tr), ops));
  for (int j = 0; j < m; ++j)
    if (linear[size_t(c + j)]) cts[size_t(c + j)] = r.at(size_t(j));
  for (int k = 0; k < nl; ++k) cts[size_t(lin_c[size_t(k)])] = r.at(size_t(m + k));
  for (size_t k = 0; k < lin_x.size(); ++k) cts[size_t(c + m + lin_x[k])] = r.at(size_t(m + nl) + k);
}


// ------------------------------------------------------------------ batching

namespace {
NodeRef swap01(NodeTable& t, const NodeRef& x) {
  std::vector<std::int64_t> perm{1, 0};
  for (int d = 2; d < x->rank(); ++d) perm.push_back(d);
  return build::transpose(t, x, perm);
}
// where(pred[b], on_true, on_false), pred along the leading dimension.
NodeRef select_lanes(NodeTable& t, const NodeRef& pred, const NodeRef& on_true, const NodeRef& on_false) {
  return build::select(t, build::broadcast_in_dim(t, pred, on_true->shape(), {0}), on_true, on_false);
}
}  // namespace

// An unbatched index: the cond of the batched branches. A batched one (each
// example its own branch): every branch runs on the whole batch and each
// example keeps its branch's result (a select), as JAX's.
NodeRef Rule<Op::cond>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                              const BatchInfo& b) {
  const auto& branches = attrs_of(n).branches;
  const std::vector<bool> flags(batched.begin() + 1, batched.end());
  const std::vector<NodeRef> ops(x.begin() + 1, x.end());
  std::vector<GraphRef> bb;
  for (auto& br : branches) bb.push_back(std::make_shared<Graph>(batch_graph(*br, flags, b)));
  if (!batched[0]) return build::cond(t, x[0], std::move(bb), ops);
  const std::int64_t nb = std::int64_t(branches.size());
  NodeRef idx = build::binary(t, Op::max, build::binary(t, Op::min, x[0], build::broadcast_in_dim(t, build::scalar(t, DType::int32, double(nb - 1)), x[0]->shape(), {})),
                              build::broadcast_in_dim(t, build::scalar(t, DType::int32, 0), x[0]->shape(), {}));
  std::vector<std::vector<NodeRef>> outs;
  // A batched predicate runs every branch (as JAX's select): their effects too.
  for (auto& g : bb) outs.push_back(inline_graph(t, *g, ops, b.effects));
  std::vector<NodeRef> results = outs[0];
  for (std::int64_t k = 1; k < nb; ++k) {
    NodeRef is_k = build::binary(t, Op::eq, idx, build::broadcast_in_dim(t, build::scalar(t, DType::int32, double(k)), idx->shape(), {}));
    for (size_t j = 0; j < results.size(); ++j) results[j] = select_lanes(t, is_k, outs[size_t(k)][j], results[j]);
  }
  return build::tuple(t, results);
}

// Every carry batched; the loop runs while any example's predicate holds,
// and an example whose predicate fails keeps its carry (JAX's rule).
NodeRef Rule<Op::while_>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                                const BatchInfo& b) {
  const auto& w = attrs_of(n);
  const size_t cc = size_t(w.cond_consts), bc = size_t(w.body_consts), m = x.size() - cc - bc;
  std::vector<bool> cflags(batched.begin(), batched.begin() + std::ptrdiff_t(cc)), bflags(batched.begin() + std::ptrdiff_t(cc), batched.begin() + std::ptrdiff_t(cc + bc));
  cflags.insert(cflags.end(), m, true);
  bflags.insert(bflags.end(), m, true);
  const Graph cb = batch_graph(*w.cond, cflags, b), bb = batch_graph(*w.body, bflags, b);
  std::vector<NodeRef> carries;
  for (size_t k = 0; k < m; ++k) carries.push_back(bt::batched(t, x[cc + bc + k], batched[cc + bc + k], b));
  // The new regions' parameters: the condition's (cond consts, carries);
  // the body's (cond consts, body consts, carries).
  NodeTable u;
  auto cond = std::make_shared<Graph>(), body = std::make_shared<Graph>();
  cond->name = "vmap(" + w.cond->name + ")";
  body->name = "vmap(" + w.body->name + ")";
  for (auto& p : cb.params) cond->params.push_back(build::parameter(u, int(cond->params.size()), p->aval));
  NodeRef pred = inline_graph(u, cb, cond->params, &cond->effects).at(0);
  NodeRef any = build::reduce(u, Op::reduce_max, build::convert(u, pred, DType::int32), {0});
  cond->outputs = {build::binary(u, Op::gt, any, build::scalar(u, DType::int32, 0))};
  NodeTable v;
  std::vector<NodeRef> cps, bps, cs;
  for (size_t k = 0; k < cc; ++k) cps.push_back(build::parameter(v, int(k), cb.params[k]->aval));
  for (size_t k = 0; k < bc; ++k) bps.push_back(build::parameter(v, int(cc + k), bb.params[k]->aval));
  for (size_t k = 0; k < m; ++k) cs.push_back(build::parameter(v, int(cc + bc + k), bb.params[bc + k]->aval));
  body->params = cps;
  body->params.insert(body->params.end(), bps.begin(), bps.end());
  body->params.insert(body->params.end(), cs.begin(), cs.end());
  std::vector<NodeRef> cin = cps, bin = bps;
  cin.insert(cin.end(), cs.begin(), cs.end());
  bin.insert(bin.end(), cs.begin(), cs.end());
  std::vector<NodeRef> again;  // the condition's effects ran in the condition region already
  NodeRef p = inline_graph(v, cb, cin, &again).at(0);
  std::vector<NodeRef> next = inline_graph(v, bb, bin, &body->effects);
  for (size_t k = 0; k < m; ++k) body->outputs.push_back(select_lanes(v, p, next[k], cs[k]));
  attr::While nw;
  nw.cond = cond;
  nw.body = body;
  nw.cond_consts = std::int64_t(cc);
  nw.body_consts = std::int64_t(cc + bc);
  std::vector<NodeRef> ops(x.begin(), x.begin() + std::ptrdiff_t(cc));
  ops.insert(ops.end(), x.begin(), x.begin() + std::ptrdiff_t(cc + bc));
  ops.insert(ops.end(), carries.begin(), carries.end());
  return build::while_loop(t, std::move(nw), ops);
}

// Every carry batched; batched xs scanned along their second dimension (the
// batch moved behind the scanned axis), ys moved back.
NodeRef Rule<Op::scan>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                              const BatchInfo& b) {
  attr::Scan s = attrs_of(n);
  const size_t c = size_t(s.consts), m = size_t(s.carries);
  std::vector<bool> flags = batched;
  std::vector<NodeRef> ops = x;
  for (size_t k = c; k < c + m; ++k) ops[k] = bt::batched(t, x[k], batched[k], b), flags[k] = true;
  for (size_t k = c + m; k < x.size(); ++k)
    if (batched[k]) ops[k] = swap01(t, x[k]);
  s.body = std::make_shared<Graph>(batch_graph(*s.body, flags, b));
  auto r = build::results(t, build::scan(t, s, ops));
  for (size_t k = m; k < r.size(); ++k) r[k] = swap01(t, r[k]);
  return build::tuple(t, r);
}

// ------------------------------------------------------------------ complex expansion, cost

// The pass expands regions itself (their parameters and results packed like
// the operands and results they meet).
TESSEL_COMPLEX_NEVER(cond)
TESSEL_COMPLEX_NEVER(while_)
TESSEL_COMPLEX_NEVER(scan)
// A cond runs one branch (the dearest counts); a while loop's trip count is
// known only when it runs (one trip, as XLA's cost analysis counts); a scan
// runs its body `length` times.
NodeCost Rule<Op::cond>::cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  c.one_region = true;
  return c;
}
TESSEL_COST(while_, memory_cost)
NodeCost Rule<Op::scan>::cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  c.region_runs = double(n.attr<attr::Scan>().length);
  return c;
}

}  // namespace tessel
