#include "runtime/collectives.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "runtime/device.hpp"
#include "runtime/executable.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::rt {

namespace {

// Parts copy and fold this many bytes at a time: a piece of every operand
// and of the result fit the L2, and a piece copied into several results is
// read from memory once and from the cache for its other copies.
constexpr std::size_t kPieceBytes = std::size_t(32) << 10;
// A caller that sees every result of its group writes into its peers'
// results only above this many bytes per result: below, each member makes
// its own result from the whole group's operands (writing a peer's cache
// lines costs more than folding or copying a small buffer whole).
constexpr std::size_t kPeerWritesBytes = std::size_t(64) << 10;
// A lockstep run whose results over all members pass this many bytes runs
// its parts side by side on every core.
constexpr std::size_t kParallelBytes = std::size_t(1) << 20;

std::int64_t numel(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::vector<std::int64_t> strides(const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[std::size_t(d)] = st[std::size_t(d) + 1] * s[std::size_t(d) + 1];
  return st;
}

// (rows before dim d, elements from dim d on) of a shape.
std::pair<std::int64_t, std::int64_t> blocks(const std::vector<std::int64_t>& s, std::int64_t d) {
  std::int64_t outer = 1, len = 1;
  for (std::int64_t i = 0; i < std::int64_t(s.size()); ++i) (i < d ? outer : len) *= s[std::size_t(i)];
  return {outer, len};
}

std::string positions_text(const std::vector<std::int64_t>& g) {
  std::string t = "[";
  for (std::size_t k = 0; k < g.size(); ++k) t += (k ? ", " : "") + std::to_string(g[k]);
  return t + "]";
}

void copy(void* dst, const void* src, std::size_t bytes, bool stream) {
  if (stream) stream_copy(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

// Output chunk k along concat of member `rank` = member k's chunk `rank`
// along split.
void all_to_all(const Collective& c, const std::vector<const void*>& in, std::size_t rank, char* out, bool stream) {
  const std::size_t es = c.element_bytes;
  const std::int64_t n = std::int64_t(in.size()), split = c.dimension, concat = c.concat;
  std::vector<std::int64_t> chunk = c.in_shape;
  chunk[std::size_t(split)] /= n;
  if (chunk.empty() || numel(chunk) == 0) return;
  const auto ist = strides(c.in_shape), ost = strides(c.out_shape);
  // The chunk's trailing elements that are contiguous in both the peer's
  // input and this output are copied as one run: the minor dims the chunk
  // spans whole in both, and the dim that ends them. (Copying only the last
  // dim's rows made a run of 8 bytes of a packed complex array's all-to-all
  // over its last logical dim.)
  int inner = int(chunk.size()) - 1;
  std::int64_t run = chunk[std::size_t(inner)];
  while (inner > 0 && chunk[std::size_t(inner)] == c.in_shape[std::size_t(inner)] &&
         chunk[std::size_t(inner)] == c.out_shape[std::size_t(inner)]) {
    --inner;
    run *= chunk[std::size_t(inner)];
  }
  const std::size_t bytes = std::size_t(run) * es;
  const std::int64_t src0 = std::int64_t(rank) * chunk[std::size_t(split)] * ist[std::size_t(split)];
  const std::int64_t rows = numel(chunk) / run;
  std::vector<std::int64_t> idx(std::size_t(inner), 0);
  std::int64_t src = 0, dst = 0;  // the row's offset within a chunk, in the input's and the output's strides
  for (std::int64_t f = 0; f < rows; ++f) {
    for (std::int64_t k = 0; k < n; ++k)
      copy(out + (dst + k * chunk[std::size_t(concat)] * ost[std::size_t(concat)]) * std::int64_t(es),
           static_cast<const char*>(in[std::size_t(k)]) + (src0 + src) * std::int64_t(es), bytes, stream);
    for (int d = inner - 1; d >= 0; --d) {
      src += ist[std::size_t(d)];
      dst += ost[std::size_t(d)];
      if (++idx[std::size_t(d)] < chunk[std::size_t(d)]) break;
      src -= idx[std::size_t(d)] * ist[std::size_t(d)];
      dst -= idx[std::size_t(d)] * ost[std::size_t(d)];
      idx[std::size_t(d)] = 0;
    }
  }
}

}  // namespace

std::size_t Collective::in_bytes() const { return std::size_t(numel(in_shape)) * element_bytes; }
std::size_t Collective::out_bytes() const { return std::size_t(numel(out_shape)) * element_bytes; }

void collective_part(const Collective& c, const GroupView& v, std::size_t item, bool stream) {
  const std::size_t es = c.element_bytes, n = v.in.size();
  auto in = [&](std::size_t k, std::int64_t at) { return static_cast<const char*>(v.in[k]) + at * std::int64_t(es); };
  switch (c.kind) {
    case CollectiveKind::all_reduce: {
      // Elements [lo, hi): folded into the first result held, a piece at a
      // time, and copied from the cache into the others.
      const std::int64_t count = numel(c.in_shape), lo = count * std::int64_t(item) / std::int64_t(n),
                         hi = count * std::int64_t(item + 1) / std::int64_t(n);
      const std::size_t first = std::size_t(std::find_if(v.out.begin(), v.out.end(), [](void* p) { return p; }) -
                                            v.out.begin());
      TESSEL_CHECK_INTERNAL(first < n, "an all-reduce part with no result to write");
      const std::int64_t piece = std::max<std::int64_t>(1, std::int64_t(kPieceBytes / es));
      std::vector<const void*> rest(n - 1);
      for (std::int64_t a = lo; a < hi; a += piece) {
        const std::int64_t len = std::min(piece, hi - a);
        const std::size_t at = std::size_t(a) * es;
        for (std::size_t m = 1; m < n; ++m) rest[m - 1] = in(m, a);
        char* dst = static_cast<char*>(v.out[first]) + at;
        c.fold(dst, in(0, a), rest, len);
        for (std::size_t m = first + 1; m < n; ++m)
          if (v.out[m]) copy(static_cast<char*>(v.out[m]) + at, dst, std::size_t(len) * es, stream);
      }
      return;
    }
    case CollectiveKind::all_gather: {
      // The member's operand, a piece at a time, into its block of every
      // result held: the operand is read from memory once.
      auto [outer, len] = blocks(c.in_shape, c.dimension);
      const std::size_t row = std::size_t(len) * es;
      const char* src = in(item, 0);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::size_t at = 0; at < row; at += kPieceBytes)
          for (std::size_t m = 0; m < n; ++m)
            if (v.out[m])
              copy(static_cast<char*>(v.out[m]) + std::size_t(o * std::int64_t(n) + std::int64_t(item)) * row + at,
                   src + std::size_t(o) * row + at, std::min(kPieceBytes, row - at), stream);
      return;
    }
    case CollectiveKind::reduce_scatter: {
      // The member's block of each outer row, folded over the group.
      if (!v.out[item]) return;
      char* out = static_cast<char*>(v.out[item]);
      auto [outer, len] = blocks(c.out_shape, c.dimension);
      std::vector<const void*> rest(n - 1);
      for (std::int64_t o = 0; o < outer; ++o) {
        const std::int64_t at = (o * std::int64_t(n) + std::int64_t(item)) * len;
        for (std::size_t m = 1; m < n; ++m) rest[m - 1] = in(m, at);
        c.fold(out + o * len * std::int64_t(es), in(0, at), rest, len);
      }
      return;
    }
    case CollectiveKind::all_to_all:
      if (v.out[item]) all_to_all(c, v.in, item, static_cast<char*>(v.out[item]), stream);
      return;
    case CollectiveKind::permute: {
      // Its source's operand, or zeros.
      if (!v.out[item]) return;
      std::int64_t source = -1;
      for (auto [s, t] : c.pairs)
        if (t == std::int64_t(item)) source = s;
      if (source >= 0) copy(v.out[item], v.in[std::size_t(source)], c.in_bytes(), stream);
      else std::memset(v.out[item], 0, c.in_bytes());
      return;
    }
  }
}

void run_collective(const Collective& c, const std::vector<ExecContext*>& acting) {
  std::map<std::int64_t, ExecContext*> here;  // by position
  for (auto* x : acting) here[x->position] = x;
  std::size_t members = 0;
  for (const auto& g : c.groups) members += g.size();
  const bool large = c.out_bytes() * members >= kParallelBytes;
  // Runs parts (view, item) holding compute slots: side by side on every
  // core in a lockstep launch (ExecContext::parallel) whose results are large.
  auto run_parts = [&](const std::vector<std::pair<const GroupView*, std::size_t>>& parts, bool stream) {
    if (acting.front()->parallel && large && parts.size() > 1) {
      ComputeSlot slot(ComputeSlot::Width::machine);
      parallel_for_machine(0, std::int64_t(parts.size()), 1, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t p = lo; p < hi; ++p) collective_part(c, *parts[std::size_t(p)].first, parts[std::size_t(p)].second, stream);
      });
    } else {
      ComputeSlot slot;
      for (auto& [view, item] : parts) collective_part(c, *view, item, stream);
    }
  };
  Communicator* const comm = acting.front()->comm;
  if (!comm) {
    // A lockstep run inside one process sees every member: every part, no
    // meeting. A result the same on every member of a group is written
    // once where the run lets positions share blocks (SharedSlots): into
    // the group's first member's, which the others' then are. (8 x 16 MiB
    // psums wrote 128 MiB of identical results; an all-gather of 64 MiB
    // over 8 devices 4 GiB.)
    SharedSlots* const shared = c.same_result() ? acting.front()->shared : nullptr;
    auto at = [&](std::int64_t p) { return here.at(p); };
    // The groups here: inside a branch or a loop only some positions may
    // run (those that took the branch, those still looping), each group
    // whole or not at all.
    std::vector<const std::vector<std::int64_t>*> groups;
    for (const auto& g : c.groups) {
      const auto n = std::count_if(g.begin(), g.end(), [&](std::int64_t p) { return here.count(p) > 0; });
      if (n == 0) continue;
      if (std::size_t(n) < g.size())
        throw ValueError(detail::cat(
            "a collective over the devices at launch positions ", positions_text(g), " ran on only ", n,
            " of them: inside a cond or a while loop, every device of a collective's group must take the same "
            "branch and run the same number of steps (the predicate differs between devices)"));
      groups.push_back(&g);
    }
    std::vector<GroupView> views(groups.size());
    std::vector<std::pair<const GroupView*, std::size_t>> parts;
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& g = *groups[gi];
      GroupView& v = views[gi];
      for (std::int64_t p : g) v.in.push_back(at(p)->slots[std::size_t(c.in_slot)]);
      if (shared) {
        v.out.assign(g.size(), nullptr);
        v.out[0] = shared->own(*at(g[0]), c.out_slot);
      } else {
        for (std::int64_t p : g) v.out.push_back(at(p)->slots[std::size_t(c.out_slot)]);
      }
      for (std::size_t k = 0; k < g.size(); ++k) parts.push_back({&v, k});
    }
    run_parts(parts, c.out_bytes() * (shared ? c.groups.size() : members) >= kStreamBytes);
    if (shared)
      for (const auto* g : groups)
        for (std::size_t m = 1; m < g->size(); ++m) shared->share(*at((*g)[m]), *at((*g)[0]), c.out_slot);
    return;
  }
  // The members here meet the rest of each group through the communicator.
  const bool stream = c.out_bytes() * members >= kStreamBytes;
  for (const auto& g : c.groups) {
    std::vector<Member> mine;
    std::vector<int> positions;
    for (std::int64_t p : g)
      if (auto it = here.find(p); it != here.end()) {
        mine.push_back({int(p), it->second->slots[std::size_t(c.in_slot)], it->second->slots[std::size_t(c.out_slot)]});
        positions.push_back(int(p));
      }
    if (mine.empty()) continue;
    if (c.kind == CollectiveKind::all_reduce && !comm->shares_memory(g)) {
      comm->reduce_between_processes(g, mine, numel(c.in_shape), c.element_bytes, c.fold);
      continue;
    }
    GroupView v = comm->meet(g, mine, c.in_bytes());
    // Which parts, into which results: the members' own parts into every
    // result where every result is here to write and large; else every
    // part into the results of the members here.
    const bool peers = c.out_bytes() > kPeerWritesBytes &&
                       std::all_of(v.out.begin(), v.out.end(), [](void* p) { return p != nullptr; });
    std::vector<std::pair<const GroupView*, std::size_t>> parts;
    if (peers) {
      for (std::size_t k = 0; k < g.size(); ++k)
        if (here.count(g[k])) parts.push_back({&v, k});
    } else {
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (!here.count(g[k])) v.out[k] = nullptr;
        parts.push_back({&v, k});
      }
    }
    run_parts(parts, stream);
    comm->release(g, positions);
  }
}

}  // namespace tessel::rt
