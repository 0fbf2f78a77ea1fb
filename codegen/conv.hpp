// The conv primitive (tracer/rules_conv.cpp) run by oneDNN's convolution on
// the device's own threads, tessel's own loops where oneDNN cannot serve.
//
// oneDNN (Debian's, built on OpenMP) plans and runs every primitive with one
// thread (omp_set_num_threads(1) on the calling thread, restored after), so
// it never starts a pool behind the devices' backs; the batch is cut into a
// fixed number of blocks (a function of the shape alone, so the bits are
// too) that run on the device's threads. Primitives are made once, when the
// program compiles, and held by the thunk.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

std::unique_ptr<rt::Thunk> conv_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes);
// Whether a float32 convolution of float32 operands would run with bfloat16
// operands on this CPU's native bfloat16 instructions (AVX512_BF16), by the
// same oneDNN form it takes in float32 (forward, backward-data or
// backward-weights): codegen/narrow_ops.cpp then gives it the operands'
// bfloat16 sources where they are converts (a mixed convolution, bfloat16 x
// bfloat16 -> float32, twice float32's speed on Zen 5).
bool conv_in_bfloat16(const Node& n);
// Whether the conv reads its input's parts where the input is a
// concatenation of them along its first spatial dim, which leads each image
// (N, rows, ...: an image split by rows with its neighbours' border rows,
// tracer/halo.cpp), in the forward form oneDNN runs on the input as it lies:
// each block of images copies its rows of the parts into a buffer of its
// thread just before oneDNN reads them (the same primitive on the same
// values: the same bits), instead of a pass that writes the whole
// concatenation to memory first. Its reads are then the parts and the
// kernel (codegen/fusion.cpp).
bool conv_reads_parts(const Node& n);
// Bytes of workspace the routine needs: the input dilated and padded when
// oneDNN cannot take its dilation or crop, and the kernel in oneDNN's layout.
std::size_t conv_workspace(const Node& n);

}  // namespace tessel::codegen
