// A transpose that moves the last dim of a large array (x.T, a symmetrised
// x + x.T's x.T), as a step of its own (StepKind::Transpose): the fused
// loop nest read such an operand one element per line, the lines at a
// power-of-two stride in a handful of cache sets (a 4096^2 float32 x.T took
// 50 ms, 30x an elementwise pass). Here it is copied by square blocks, each
// line of the operand and of the result read or written once: on CPUs with
// AVX-512, 16 x 16 float32 (8 x 8 float64) blocks transposed in registers.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

// Whether n is a transpose the fusion plan gives a step of its own: it moves
// the operand's last dim, whose neighbours along the result's last dim lie a
// line or more apart, over at least kTiledTransposeElements elements.
bool transposes_by_blocks(const Node& n);
inline constexpr std::int64_t kTiledTransposeElements = std::int64_t(1) << 15;

// The thunk computing transpose n from its operand in slot `in` into `out`.
std::unique_ptr<rt::Thunk> make_transpose_thunk(const Node& n, int in, int out);

// dst (cols x rows, rows ldd apart) = src^T (rows x cols, rows lds apart),
// elements of `esize` bytes (1, 2, 4 or 8): dst[c*ldd + r] = src[r*lds + c].
void transpose_block(const void* src, std::int64_t rows, std::int64_t cols, std::int64_t lds, void* dst,
                     std::int64_t ldd, int esize);

}  // namespace tessel::codegen
