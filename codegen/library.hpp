// Library ops (OpFamily::Library): primitives run by a routine on whole
// arrays (sort, scatter, LAPACK's factorisations in codegen/lapack.cpp). Each names its own routine here, in
// one table indexed by op; compiling a library op that has none is a loud
// InternalError, never another op's routine (tests/codegen check that every
// Library op has one).
#pragma once

#include <memory>
#include <vector>

#include "codegen/gemm.hpp"
#include "runtime/device.hpp"
#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

// The thunk that runs library node `n`, reading buffer slots `reads` (its
// operands, in order) and writing slots `writes` (its result, or each
// element of its tuple).
using LibraryRoutine = std::unique_ptr<rt::Thunk> (*)(const Node& n, const std::vector<int>& reads,
                                                      const std::vector<int>& writes);

// The routine of a Library-family op; null when it has none.
LibraryRoutine library_routine(Op op);
// Bytes of workspace the routine of `n` needs beside its results (0: none):
// compile() gives it a slot live for that step only, after `writes`.
std::size_t library_workspace(const Node& n);
// The compute slot of work as large as a machine-wide dot (dots, FFTs,
// convolutions): every core, or, where that does not pay (an oversubscribed
// host), every core when nothing else computes (runtime/device.hpp,
// ComputeSlot); and its words in a thunk's text.
rt::ComputeSlot::Width machine_wide_width();
const char* width_words(rt::ComputeSlot::Width w);
// Tasks of a step that runs tessel's GEMM or other task-cut work: on the
// whole host in a machine-wide turn (ExecContext::machine_wide), else on
// the device's arena.
gemm::ParallelFor step_tasks(bool machine_wide);
// The thunk for `n` (InternalError naming the op when it has no routine).
std::unique_ptr<rt::Thunk> library_thunk(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes);

}  // namespace tessel::codegen
