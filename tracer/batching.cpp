#include "tracer/batching.hpp"

#include <unordered_set>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

namespace tessel {

Graph batch_graph(const Graph& g_in, const std::vector<bool>& batched, const BatchInfo& b, std::vector<bool>* out_batched) {
  TESSEL_CHECK_INTERNAL(batched.size() == g_in.params.size(), "batch_graph: ", batched.size(), " flags for ",
                        g_in.params.size(), " parameters");
  const bool calls = has_calls(g_in);
  Graph inlined;
  if (calls) inlined = inline_calls(g_in, /*keep_custom=*/true);
  const Graph& g = calls ? inlined : g_in;
  NodeTable t;
  Graph out;
  out.name = "vmap(" + g.name + ")";
  std::unordered_set<const Node*> is_batched;  // new nodes carrying a batch dimension
  std::vector<NodeRef> deposited;              // effects the rules made (BatchInfo::effects)
  BatchInfo info = b;
  info.effects = &deposited;
  for (size_t i = 0; i < g.params.size(); ++i) {
    Aval a = g.params[i]->aval;
    if (batched[i]) a.shape.insert(a.shape.begin(), b.size);
    out.params.push_back(build::parameter(t, int(i), a));
    if (batched[i]) is_batched.insert(out.params.back().get());
  }
  auto m = rewrite(
      g, t, out.params,
      [&](const Node& n, const std::vector<NodeRef>& x) -> NodeRef {
        std::vector<bool> flags;
        bool any = false;
        for (auto& xi : x) {
          flags.push_back(is_batched.count(xi.get()) > 0);
          any = any || flags.back();
        }
        if (!any) return build::with_operands(t, n, x);
        NodeRef y = rules(n.op).batch(t, n, x, flags, info);
        is_batched.insert(y.get());
        return y;
      },
      /*into_regions=*/false);
  if (out_batched) out_batched->clear();
  for (auto& o : g.outputs) {
    NodeRef y = m.at(o.get());
    const bool bat = is_batched.count(y.get()) > 0;
    if (out_batched) out_batched->push_back(bat);
    out.outputs.push_back(bt::batched(t, y, bat, b));
  }
  for (auto& e : g.effects) out.effects.push_back(m.at(e.get()));
  out.effects.insert(out.effects.end(), deposited.begin(), deposited.end());
  return out;
}

namespace bt {

NodeRef batched(NodeTable& t, const NodeRef& x, bool is_batched, const BatchInfo& b) {
  if (is_batched) return x;
  Shape s = x->shape();
  s.insert(s.begin(), b.size);
  std::vector<std::int64_t> dims;
  for (int d = 0; d < x->rank(); ++d) dims.push_back(d + 1);
  return build::broadcast_in_dim(t, x, s, dims);
}

std::vector<NodeRef> all_batched(NodeTable& t, const std::vector<NodeRef>& x, const std::vector<bool>& flags,
                                 const BatchInfo& b) {
  std::vector<NodeRef> out;
  for (size_t k = 0; k < x.size(); ++k) out.push_back(batched(t, x[k], flags[k], b));
  return out;
}

std::vector<std::int64_t> shifted(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> out;
  for (auto d : dims) out.push_back(d + 1);
  return out;
}

NodeRef same_op(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& flags,
                const BatchInfo& b) {
  auto xs = all_batched(t, x, flags, b);
  Aval declared = n.aval;
  declared.shape.insert(declared.shape.begin(), b.size);
  Node copy;
  copy.op = n.op;
  copy.attrs = n.attrs;
  copy.aval = declared;
  return build::with_operands(t, copy, xs);
}

NodeRef element(NodeTable& t, const NodeRef& x, std::int64_t i) {
  const Shape& s = x->shape();
  std::vector<std::int64_t> start(s.size(), 0), limit(s.begin(), s.end()), stride(s.size(), 1);
  start[0] = i;
  limit[0] = i + 1;
  return build::reshape(t, build::slice(t, x, start, limit, stride), Shape(s.begin() + 1, s.end()));
}

NodeRef by_map(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& flags,
               const BatchInfo& b) {
  // A scan over the batch: unbatched operands are its constants, batched
  // ones its xs; its body is n on one example; its ys the results.
  NodeTable u;
  auto body = std::make_shared<Graph>();
  body->name = std::string("map(") + op_name(n.op) + ")";
  std::vector<NodeRef> consts, xs, inner(x.size());
  for (size_t k = 0; k < x.size(); ++k)
    if (!flags[k]) {
      Aval a = x[k]->aval;
      inner[k] = build::parameter(u, int(body->params.size()), a);
      body->params.push_back(inner[k]);
      consts.push_back(x[k]);
    }
  for (size_t k = 0; k < x.size(); ++k)
    if (flags[k]) {
      Aval a = x[k]->aval;
      a.shape.erase(a.shape.begin());
      a.weak_type = false;
      inner[k] = build::parameter(u, int(body->params.size()), a);
      body->params.push_back(inner[k]);
      xs.push_back(x[k]);
    }
  NodeRef y = build::with_operands(u, n, inner);
  body->outputs = build::results(u, y);
  attr::Scan s;
  s.body = body;
  s.length = b.size;
  s.consts = std::int64_t(consts.size());
  s.carries = 0;
  std::vector<NodeRef> ops = consts;
  ops.insert(ops.end(), xs.begin(), xs.end());
  NodeRef r = build::scan(t, std::move(s), ops);
  if (n.aval.tuple) return r;
  return build::get_tuple_element(t, r, 0);
}

AxisSharding with_batch_dim(const AxisSharding& s, const BatchInfo& b) {
  AxisSharding r = s;
  std::vector<int> lead;
  if (!b.spmd_axis.empty()) {
    const int a = s.mesh->axis_index(b.spmd_axis);
    if (a < 0) throw ValueError("vmap: spmd_axis_name '" + b.spmd_axis + "' is not an axis of " + s.mesh->str());
    lead.push_back(a);
  }
  r.dims.insert(r.dims.begin(), lead);
  return r;
}

}  // namespace bt

}  // namespace tessel
