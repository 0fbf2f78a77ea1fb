#include "codegen/schedule.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "codegen/emit.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {
std::size_t value_bytes(const Aval& a) {
  if (!a.tuple) return std::size_t(numel(a.shape)) * dtype_size(a.dtype);
  std::size_t b = 0;
  for (auto& e : a.elements) b += value_bytes(e);
  return b;
}
}  // namespace

void schedule_for_memory(std::vector<Step>& steps, const std::vector<NodeRef>& outputs) {
  const std::size_t n = steps.size();
  std::unordered_map<const Node*, int> producer;
  for (std::size_t i = 0; i < n; ++i) producer[steps[i].node.get()] = int(i);
  // The step whose buffer a read names (an element of a tuple-valued step:
  // that step), or -1 (a parameter).
  auto source = [&](const Node* r) {
    auto it = producer.find(r);
    if (it != producer.end()) return it->second;
    if (r->op == Op::get_tuple_element) {
      it = producer.find(r->in[0].get());
      if (it != producer.end()) return it->second;
    }
    return -1;
  };
  std::unordered_set<const Node*> kept;
  for (auto& o : outputs) {
    kept.insert(o.get());
    if (o->op == Op::get_tuple_element) kept.insert(o->in[0].get());
  }
  // Per step: the values it reads (each once), the steps it waits for.
  std::vector<std::vector<const Node*>> reads(n);
  std::vector<std::vector<int>> users(n);
  std::vector<int> waiting(n, 0);
  std::unordered_map<const Node*, std::vector<int>> readers;
  for (std::size_t i = 0; i < n; ++i) {
    std::unordered_set<const Node*> seen;
    std::unordered_set<int> deps;
    for (auto& r : steps[i].reads) {
      if (!seen.insert(r.get()).second) continue;
      reads[i].push_back(r.get());
      readers[r.get()].push_back(int(i));
      const int s = source(r.get());
      if (s >= 0 && s != int(i) && deps.insert(s).second) users[std::size_t(s)].push_back(int(i)), ++waiting[i];
    }
  }
  std::unordered_map<const Node*, int> uses_left;
  for (auto& [r, rs] : readers) uses_left[r] = int(rs.size());
  std::vector<bool> done(n, false);
  // Bytes step i would free (reads it is the last reader of) minus those it allocates.
  auto frees = [&](std::size_t i) {
    long long net = kept.count(steps[i].node.get()) ? 0 : -static_cast<long long>(value_bytes(steps[i].node->aval));
    for (const Node* r : reads[i])
      if (uses_left.at(r) == 1 && source(r) >= 0 && !kept.count(r))
        net += static_cast<long long>(value_bytes(r->aval));
    return net >= 0;
  };
  // A loop step computing an output from a parameter it reads aligned (a
  // training step's update, p - lr * g) may write over that parameter when
  // it is donated (Executable::write_over_safe), but only as its last
  // reader: it waits for the parameter's other readers when anything else
  // can run. Without donation that costs nothing: the gradient it reads
  // lives longer, the output of the same size shorter.
  std::vector<const Node*> over(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    const Node& node = *steps[i].node;
    if (steps[i].kind != StepKind::Loop || node.aval.tuple || !kept.count(&node)) continue;
    const std::vector<bool> aligned = aligned_reads(steps[i]);
    for (std::size_t r = 0; r < aligned.size() && !over[i]; ++r)
      if (aligned[r] && steps[i].reads[r]->op == Op::parameter &&
          value_bytes(steps[i].reads[r]->aval) == value_bytes(node.aval))
        over[i] = steps[i].reads[r].get();
  }
  using Heap = std::priority_queue<int, std::vector<int>, std::greater<int>>;  // earliest in the given order first
  Heap freeing, other, last;
  auto ready = [&](std::size_t i) {
    if (over[i] && uses_left.at(over[i]) > 1) last.push(int(i));
    else (frees(i) ? freeing : other).push(int(i));
  };
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready(i);
  std::vector<Step> order;
  order.reserve(n);
  while (order.size() < n) {
    int i = -1;
    while (!freeing.empty() && i < 0) {
      if (!done[std::size_t(freeing.top())]) i = freeing.top();
      freeing.pop();
    }
    while (i < 0 && !other.empty()) {
      if (!done[std::size_t(other.top())]) i = other.top();
      other.pop();
    }
    while (i < 0 && !last.empty()) {
      if (!done[std::size_t(last.top())]) i = last.top();
      last.pop();
    }
    if (i < 0) throw InternalError("schedule_for_memory: the steps' reads form a cycle");
    done[std::size_t(i)] = true;
    order.push_back(std::move(steps[std::size_t(i)]));
    for (const Node* r : reads[std::size_t(i)]) {
      // The value's one reader left may now free it.
      if (--uses_left.at(r) != 1) continue;
      for (int j : readers.at(r))
        if (!done[std::size_t(j)] && waiting[std::size_t(j)] == 0 && (frees(std::size_t(j)) || over[std::size_t(j)] == r))
          ready(std::size_t(j));
    }
    for (int j : users[std::size_t(i)])
      if (--waiting[std::size_t(j)] == 0) ready(std::size_t(j));
  }
  steps = std::move(order);
}

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
