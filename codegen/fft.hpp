// The fft primitive run by FFTW3 (the serial library: no thread pool of its
// own), on the device's own thread. Plans are made once per layout under one
// process-wide lock (FFTW's planner is not thread-safe; executing a plan on
// new arrays is) and cached.
#pragma once

#include <memory>
#include <vector>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

// n: an fft node whose complex operand/result are packed (codegen/complex.hpp:
// a real array with a trailing dim of 2).
std::unique_ptr<rt::Thunk> fft_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes);

}  // namespace tessel::codegen
