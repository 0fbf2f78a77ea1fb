#include "codegen/schedule.hpp"

#include <unordered_map>

namespace tessel::codegen {

void sink_collectives(std::vector<Step>& steps) {
  std::vector<Step> order;
  order.reserve(steps.size());
  // Collectives not yet placed, by the node they compute, in original order.
  std::vector<Step*> pending;
  std::unordered_map<const Node*, std::size_t> pending_at;  // node -> index in `pending`
  std::vector<bool> placed;
  // Places pending collective i, after the pending collectives it reads.
  // (An explicit stack: chains of collectives may be long.)
  auto place = [&](std::size_t first) {
    if (placed[first]) return;
    placed[first] = true;
    std::vector<std::pair<std::size_t, std::size_t>> stack{{first, 0}};  // (pending index, next read)
    while (!stack.empty()) {
      auto [i, k] = stack.back();
      const auto& reads = pending[i]->reads;
      if (k < reads.size()) {
        ++stack.back().second;
        auto it = pending_at.find(reads[k].get());
        if (it != pending_at.end() && !placed[it->second]) {
          placed[it->second] = true;
          stack.push_back({it->second, 0});
        }
      } else {
        order.push_back(std::move(*pending[i]));
        stack.pop_back();
      }
    }
  };
  for (Step& s : steps) {
    if (s.kind == StepKind::Collective) {
      pending_at[s.node.get()] = pending.size();
      pending.push_back(&s);
      placed.push_back(false);
      continue;
    }
    for (const NodeRef& r : s.reads)
      if (auto it = pending_at.find(r.get()); it != pending_at.end()) place(it->second);
    order.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < pending.size(); ++i) place(i);
  steps = std::move(order);
}

}  // namespace tessel::codegen
