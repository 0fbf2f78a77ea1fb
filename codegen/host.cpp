#include "codegen/host.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "codegen/llvm_headers.hpp"

namespace tessel::codegen {

bool HostCpu::has(const std::string& f) const { return std::find(features.begin(), features.end(), f) != features.end(); }

int HostCpu::float32_lanes() const {
  if (has("avx512f")) return 16;
  if (has("avx")) return 8;
  return 4;
}

bool avx512_disabled() {
  const char* v = std::getenv("TESSEL_NO_AVX512");
  return v && *v && std::string(v) != "0";
}

const HostCpu& host_cpu() {
  static const HostCpu cpu = [] {
    HostCpu c;
    c.name = llvm::sys::getHostCPUName().str();
    const bool no_avx512 = avx512_disabled();
    for (auto& kv : llvm::sys::getHostCPUFeatures())
      if (kv.getValue() && !(no_avx512 && kv.getKey().starts_with("avx512"))) c.features.push_back(kv.getKey().str());
    std::sort(c.features.begin(), c.features.end());
    return c;
  }();
  return cpu;
}

}  // namespace tessel::codegen
