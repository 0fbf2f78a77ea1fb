// Lowering one fusion step (a loop nest) to LLVM IR and native code.
//
// A kernel is `void k(void** buffers, i64 begin, i64 end)`: buffers[0] is the
// output, buffers[1..] the step's reads; [begin, end) is a range of work
// items, so the caller can split the nest over the device's threads.
//
// Loop kernels walk the output row by row (the last dimension cut into blocks
// so that long rows split too) and evaluate the fused expression at each
// index; the innermost loop is unit stride and the loop vectoriser turns it
// into vector code. Reductions whose last input dimension is reduced keep an
// accumulator per output (row reduction, vectorised with reassociation);
// reductions that keep the last dimension walk the input in memory order and
// accumulate whole output rows (column reduction).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/fusion.hpp"
#include "codegen/jit.hpp"

namespace tessel::codegen {

using KernelFn = void (*)(void** buffers, std::int64_t begin, std::int64_t end);

struct Kernel {
  KernelFn fn = nullptr;
  std::int64_t items = 0;          // work items: the range to split
  std::int64_t work_per_item = 0;  // elements touched per item (for the grain size)
  std::string key;                 // what the kernel cache knows it by
  ModuleRef code;                  // keeps the kernel's machine code alive
};

// The compiled kernel of a Loop or Reduce step (cached by its description).
// alias_read >= 0: a variant that writes over that read (an aligned one,
// aligned_reads): it loads the read from the output's buffer, so the one
// pointer serves both and the vectoriser sees each element loaded before
// it is stored. Callers bind the output to that read's block.
//
// stream: a Loop kernel whose output block is 64-byte aligned (the caller's
// to check) and whose aligned vector stores bypass the cache (non-temporal),
// for results too large to stay in it (KernelThunk in compile.cpp).
Kernel compile_kernel(const Step& step, int alias_read = -1, bool stream = false);

// Per read of a Loop step: whether the kernel reads it only at the index it
// writes (every path from the root to it runs through elementwise ops of the
// root's shape, and it has that shape and the root's element size).
std::vector<bool> aligned_reads(const Step& step);

}  // namespace tessel::codegen
