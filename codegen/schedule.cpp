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
  auto place = [&](auto&& self, std::size_t i) -> void {
    if (placed[i]) return;
    placed[i] = true;
    for (const NodeRef& r : pending[i]->reads)
      if (auto it = pending_at.find(r.get()); it != pending_at.end()) self(self, it->second);
    order.push_back(std::move(*pending[i]));
  };
  for (Step& s : steps) {
    if (s.kind == StepKind::Collective) {
      pending_at[s.node.get()] = pending.size();
      pending.push_back(&s);
      placed.push_back(false);
      continue;
    }
    for (const NodeRef& r : s.reads)
      if (auto it = pending_at.find(r.get()); it != pending_at.end()) place(place, it->second);
    order.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < pending.size(); ++i) place(place, i);
  steps = std::move(order);
}

}  // namespace tessel::codegen
