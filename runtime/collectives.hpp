// Collectives: what each kind computes from its group's buffers, written
// once over a view of the group (GroupView: every member's operand and the
// results the caller may write, wherever they live), for every way a launch
// runs (docs/runtime.md):
//
//   a device on its own thread      meets its group (Communicator::meet) and
//                                   runs its share of the work
//   a lockstep run in one process   one thread sees every member's buffers:
//                                   it runs all the work, no meeting
//   a lockstep run across processes one thread meets for every member here;
//                                   the others' operands arrive staged
//
// A collective's work comes in parts, one per member of its group (the
// part's "item"): an all-reduce's part folds its 1/n of the elements, an
// all-gather's copies its member's operand, each into every result the
// view lets it write; a reduce-scatter's, an all-to-all's and a permute's
// part makes its member's result. Which parts a caller runs, and which
// results it writes, is decided in one place (run_collective): the parts
// of the members here, into every member's result, where the caller sees
// every result and the work is large (so every operand byte is read once
// and every result byte written once); else every part, into the results
// of the members here only (each member reads the whole group's operands).
// The fold is the left fold in group order either way: the same bits in
// every mode, split and process layout.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/communicator.hpp"

namespace tessel::rt {

struct ExecContext;

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all, permute };

// One collective of a program, as codegen describes it.
struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  std::size_t element_bytes = 0;
  std::vector<std::int64_t> in_shape, out_shape;  // one member's operand and result
  // all_gather: the dimension gathered along; reduce_scatter: scattered
  // along; all_to_all: split along (and concat: concatenated along).
  std::int64_t dimension = 0, concat = 0;
  Fold fold;  // all_reduce and reduce_scatter: the reduction
  // The groups, flat launch positions in group order; a permute's one group
  // is every position of its mesh.
  std::vector<std::vector<std::int64_t>> groups;
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;  // permute: (source, target)
  int in_slot = 0, out_slot = 0;  // the operand's and the result's slots

  std::size_t in_bytes() const;
  std::size_t out_bytes() const;
  // Whether every member of a group receives the same result (a lockstep
  // run inside one process then writes it once: SharedSlots).
  bool same_result() const { return kind == CollectiveKind::all_reduce || kind == CollectiveKind::all_gather; }
};

// Runs `c` for the positions `acting` (one device on its own thread, or
// every position of the launch in this process in a lockstep run), each
// having run every earlier thunk; takes its compute slots itself, around
// its copies and folds, not around its waits.
void run_collective(const Collective& c, const std::vector<ExecContext*>& acting);

// The part `item` of `c` over the view: the work of the member at that
// place in the group, into every result the view holds (non-null).
// `stream`: the results outgrow the caches (stream_copy).
void collective_part(const Collective& c, const GroupView& view, std::size_t item, bool stream);

}  // namespace tessel::rt
