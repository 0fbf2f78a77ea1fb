#include "tracer/rewrite.hpp"

#include "tracer/build.hpp"
#include "tracer/errors.hpp"

namespace tessel {

std::unordered_map<const Node*, NodeRef> rewrite(const Graph& g, NodeTable& t, const std::vector<NodeRef>& params,
                                                 const RewriteFn& fn) {
  TESSEL_CHECK_INTERNAL(params.size() == g.params.size(), "rewrite: ", params.size(), " parameters for a graph of ",
                        g.params.size());
  std::unordered_map<const Node*, NodeRef> m;
  for (size_t i = 0; i < g.params.size(); ++i) m[g.params[i].get()] = params[i];
  for (auto& n : g.topo_order()) {
    if (m.count(n.get())) continue;  // a parameter
    std::vector<NodeRef> ops;
    ops.reserve(n->in.size());
    for (auto& x : n->in) ops.push_back(m.at(x.get()));
    m[n.get()] = fn ? fn(*n, ops) : build::with_operands(t, *n, ops);
  }
  return m;
}

}  // namespace tessel
