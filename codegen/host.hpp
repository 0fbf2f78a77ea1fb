// What the host CPU offers the code generator.
#pragma once

#include <string>
#include <vector>

namespace tessel::codegen {

struct HostCpu {
  std::string name;                   // LLVM's name, e.g. "znver3", "skylake-avx512"
  std::vector<std::string> features;  // enabled features, e.g. "avx2", "fma"
  bool has(const std::string& feature) const;
  // Widest float32 vector the CPU has, in lanes (16 AVX-512, 8 AVX, 4 SSE).
  int float32_lanes() const;
};

// Asks LLVM once and caches the answer.
const HostCpu& host_cpu();

// TESSEL_NO_AVX512=1: generate code as if the CPU had no AVX-512 (kernels
// then match an AVX2 machine's; useful to tell a vector-width bug from others).
bool avx512_disabled();

}  // namespace tessel::codegen
