#include "codegen/transpose_folding.hpp"

#include <algorithm>
#include <unordered_map>

#include "tracer/build.hpp"

namespace tessel::codegen {

namespace {

// The dims of an operand of rank `rank` that are neither batch nor contracting.
std::vector<std::int64_t> free_dims(int rank, const std::vector<std::int64_t>& batch,
                                    const std::vector<std::int64_t>& contract) {
  std::vector<std::int64_t> f;
  for (std::int64_t i = 0; i < rank; ++i)
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(contract.begin(), contract.end(), i) == contract.end())
      f.push_back(i);
  return f;
}

// Folds operand `x` = transpose(src, perm) into the dot when the free dims
// keep their order (the result's layout is unchanged); renames batch and
// contract through perm. Returns the operand to read.
NodeRef fold(const NodeRef& x, std::vector<std::int64_t>& batch, std::vector<std::int64_t>& contract) {
  if (x->op != Op::transpose) return x;
  const auto& perm = x->attr<attr::Dimensions>().dims;
  auto free = free_dims(x->rank(), batch, contract);
  for (size_t i = 1; i < free.size(); ++i)
    if (perm[free[i - 1]] > perm[free[i]]) return x;
  for (auto& d : batch) d = perm[d];
  for (auto& d : contract) d = perm[d];
  return x->in[0];
}

}  // namespace

Graph fold_transposes_into_dots(const Graph& g) {
  bool any = false;
  for (auto& n : g.topo_order())
    if (n->op == Op::dot_general)
      for (auto& x : n->in) any = any || x->op == Op::transpose;
  if (!any) return g;
  NodeTable t;
  std::unordered_map<const Node*, NodeRef> m;
  for (auto& n : g.topo_order()) {
    std::vector<NodeRef> in;
    for (auto& x : n->in) in.push_back(m.at(x.get()));
    if (n->op == Op::dot_general) {
      DotDims d = n->attr<attr::Dot>().dims;
      NodeRef a = fold(in[0], d.lhs_batch, d.lhs_contract);
      NodeRef b = fold(in[1], d.rhs_batch, d.rhs_contract);
      // The folded dot keeps its aval: the layout of its result is the same,
      // and a mixed bfloat16 x bfloat16 -> float32 dot (codegen/narrow_ops.hpp)
      // keeps its float32 result.
      m[n.get()] = t.make(Op::dot_general, {a, b}, n->aval, attr::Dot{d});
    } else {
      // Every other node keeps its aval (a folded dot's is its own): no
      // re-inference, which a packed complex node (codegen/complex.cpp)
      // could not pass.
      m[n.get()] = n->op == Op::parameter ? n : t.make(n->op, std::move(in), n->aval, n->attrs);
    }
  }
  Graph out;
  out.name = g.name;
  out.params = g.params;
  for (auto& o : g.outputs) out.outputs.push_back(m.at(o.get()));
  for (auto& e : g.effects) out.effects.push_back(m.at(e.get()));
  return out;
}

}  // namespace tessel::codegen
