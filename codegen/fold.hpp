// The left fold collectives reduce with (psum, pmax, pmin, psum_scatter, in
// one process and along the chain between processes): dst[i] = (...((first[i]
// op rest[0][i]) op rest[1][i]) ...) op rest[m-1][i], in one pass over every
// operand. Each block of elements is held in vector registers while every
// operand's block is combined into it, so memory sees each operand read once,
// all of them as streams side by side, and dst written once. (Folding a
// 32 KiB tile of dst with one operand after another read each operand as a
// short burst and combined through L1: a reduce-scatter of 64 MiB per device
// over 8 devices read 4.6 GB/s with the loop GCC makes of it for baseline
// x86-64, 8.0 with AVX-512, 22.9 in one pass; /tmp probe on this host.) The
// order of the operations per element is the scalar fold's, so the bits are
// the same on every ISA, in every split of the elements.
//
// Like the GEMM (gemm.hpp), the kernel is one template over the vector width
// compiled once per ISA (fold_sse2.cpp, fold_avx2.cpp, fold_avx512.cpp) and
// chosen at run time; only plain types cross into those files.
#pragma once

#include <cstdint>

namespace tessel::codegen::fold {

// The element types collectives reduce (complex ones arrive as pairs of reals).
// The narrow floats (bf16, f16, f8*) fold in fold.cpp, one element at a time:
// each step computed in float32 and rounded to the format (nearest even).
enum class Type : int { bool_, i32, i64, u32, f32, f64, i8, u8, i16, u16, u64, bf16, f16, f8e4m3fn, f8e5m2, f8e8m0fnu, f4e2m1fn };
// add (bool: or; integers wrap), max and min (floating: NaN if either is NaN).
// A floating result that is NaN is the quiet NaN std::nan("") (positive, no
// payload) whatever the operands' NaNs were, so that every ISA and every
// split of the elements gives the same bits.
enum class Combine : int { add, max, min };

void fold(Type t, Combine c, void* dst, const void* first, const void* const* rest, int m, std::int64_t count);

#define TESSEL_FOLD_DECLARE(isa) \
  void fold_##isa(Type t, Combine c, void* dst, const void* first, const void* const* rest, int m, std::int64_t count);
TESSEL_FOLD_DECLARE(sse2)
TESSEL_FOLD_DECLARE(avx2)
TESSEL_FOLD_DECLARE(avx512)
#undef TESSEL_FOLD_DECLARE

}  // namespace tessel::codegen::fold
