// Run as a child process by e2e/env_test.cpp with environment variables set:
// starts the runtime and compiles one program; prints what happened.
#include <cstdio>

#include <tessel/tessel.hpp>

namespace ts = tessel;

int main() {
  try {
    auto x = ts::arange(4.0);
    auto y = ts::jit([](ts::Array a) { return a * 2.0; })(x);
    std::printf("ok devices=%d threads=%d y[3]=%g\n", ts::device_count(), ts::threads_per_device(),
                double(y.to_vector<float>()[3]));
    return 0;
  } catch (const ts::Error& e) {
    std::printf("ts::Error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::printf("foreign exception: %s\n", e.what());
    return 4;
  }
}
