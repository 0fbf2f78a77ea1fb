// The checkpoint that 1 process x 8 devices and 2 processes x 4 devices
// both write and read (tests/mpi/mpi_test.cpp, worker.cpp "checkpoint"):
// leaves split unevenly, over a 2-D mesh, replicated, over devices of both
// processes (2..5), and split along columns, in five dtypes.
#pragma once

#include <map>
#include <random>
#include <string>

#include <tessel/tessel.hpp>

namespace tessel::mpi_test {

// Every process makes the same values.
inline std::map<std::string, Array> checkpoint_values() {
  std::mt19937 rng(2026);
  auto bits = [&](DType t, const Shape& s) {
    std::vector<unsigned char> b(std::size_t(numel(s)) * dtype_size(t) + 1);
    for (auto& c : b) c = (unsigned char)(rng() >> 7);
    if (t == DType::bfloat16)  // finite values, so that the float64 comparison of whole_bytes is exact
      for (std::size_t i = 1; i < b.size(); i += 2) b[i] &= 0x3f;
    return detail::from_host(t, s, b.data());
  };
  return {{"rows", arange(0, 78).reshape({13, 6}).astype(DType::float32) * 0.25f},
          {"grid", bits(DType::int32, {8, 12})},
          {"rep", arange(0, 5).astype(DType::complex64) * 1.5f},
          {"mid", bits(DType::bfloat16, {10, 4})},
          {"cols", bits(DType::uint8, {6, 9})}};
}

inline std::map<std::string, ShapeDtypeStruct> checkpoint_target(bool resharded) {
  const auto devs = devices();
  Mesh line(devs, {8}, {"x"});
  Mesh grid = make_mesh({4, 2}, {"a", "b"});
  Mesh wide = make_mesh({2, 4}, {"a", "b"});
  Mesh middle(std::vector<Device>(devs.begin() + 2, devs.begin() + 6), {4}, {"x"});
  auto values = checkpoint_values();
  auto sds = [&](const std::string& k, Sharding s) { return ShapeDtypeStruct{values[k].shape(), values[k].dtype(), s}; };
  if (resharded)
    return {{"rows", sds("rows", NamedSharding(grid, P("b", "a")))},
            {"grid", sds("grid", NamedSharding(line, P()))},
            {"rep", sds("rep", NamedSharding(middle, P("x")))},
            {"mid", sds("mid", NamedSharding(wide, P("b")))},
            {"cols", sds("cols", NamedSharding(line, P("x")))}};
  return {{"rows", sds("rows", NamedSharding(line, P("x")))},
          {"grid", sds("grid", NamedSharding(grid, P("a", "b")))},
          {"rep", sds("rep", NamedSharding(line, P()))},
          {"mid", sds("mid", NamedSharding(middle, P("x")))},
          {"cols", sds("cols", NamedSharding(wide, P(None, "b")))}};
}

}  // namespace tessel::mpi_test
