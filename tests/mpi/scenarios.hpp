// Programs run the same way in one process over 8 devices and in several
// processes over 8 devices in all (tests/mpi/worker.cpp under mpirun): every
// collective kind, a random draw, a sharded FFT, a distributed LU and a
// data-parallel training step; their results must agree bit for bit.
#pragma once

#include <tessel/tessel.hpp>

#include "tests/common/random_program.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tessel::mpi_test {

namespace ts = tessel;
using ts::Array;
using ts::P;

// The whole value of x as bytes, on every process (a global array is gathered).
inline std::vector<unsigned char> whole_bytes(const Array& x) {
  Array h = x.is_fully_addressable() ? x : ts::process_allgather(x);
  std::vector<unsigned char> b(std::size_t(ts::numel(h.shape())) * ts::dtype_size(h.dtype()));
  if (h.dtype() == ts::float32) {
    auto v = h.to_vector<float>();
    std::memcpy(b.data(), v.data(), b.size());
  } else if (h.dtype() == ts::int32) {
    auto v = h.to_vector<std::int32_t>();
    std::memcpy(b.data(), v.data(), b.size());
  } else if (h.dtype() == ts::complex64) {
    auto v = h.to_vector<std::complex<float>>();
    std::memcpy(b.data(), v.data(), b.size());
  } else {
    auto v = h.astype(ts::float64).to_vector<double>();
    b.resize(v.size() * sizeof(double));
    std::memcpy(b.data(), v.data(), b.size());
  }
  return b;
}

// Host data every process makes the same way.
inline Array host_data(std::uint32_t seed, ts::Shape s) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(std::size_t(ts::numel(s)));
  for (auto& e : v) e = u(rng);
  return ts::array(v, s);
}

struct Scenario {
  std::string name;
  std::function<Array()> run;
};

// Over ts::devices() (8 of them, in one process or several).
inline std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  auto mesh = [] { return ts::Mesh(ts::devices(), {4, 2}, {"x", "y"}); };
  out.push_back({"jit sum (all-reduce)", [=] {
    Array x = ts::device_put(host_data(1, {64, 48}), ts::NamedSharding(mesh(), P("x", "y")));
    return ts::jit([](const Array& a) { return ts::sum(a, 0) * 3.0f + ts::sum(a); })(x);
  }});
  out.push_back({"jit matmul (all-gather, reduce-scatter)", [=] {
    Array a = ts::device_put(host_data(2, {32, 64}), ts::NamedSharding(mesh(), P("x", "y")));
    Array b = ts::device_put(host_data(3, {64, 16}), ts::NamedSharding(mesh(), P("y", ts::None)));
    return ts::jit([](const Array& p, const Array& q) { return ts::matmul(p, q); },
                   {.out_shardings = {ts::NamedSharding(mesh(), P("x", "y"))}})(a, b);
  }});
  out.push_back({"shard_map psum, all_gather, ppermute, all_to_all, psum_scatter", [=] {
    Array x = ts::device_put(host_data(4, {16, 8}), ts::NamedSharding(mesh(), P("x", "y")));
    auto f = ts::shard_map(
        [](const Array& b) {
          Array s = ts::psum(b, "x");
          Array g = ts::all_gather(b, "y", {.axis = 1, .tiled = true});
          Array r = ts::ppermute(b, "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
          Array t = ts::all_to_all(b, "x", 0, 1, {.tiled = true});  // [1, 16]
          Array sc = ts::psum_scatter(ts::concatenate({b, b, b, b}, 0), "x", {.scatter_dimension = 0, .tiled = true});
          Array g2 = g.index({ts::all, ts::slice(0, 4)}) + g.index({ts::all, ts::slice(4, 8)});
          return ts::concatenate({s * 2.0f + r, sc, g2, t.reshape({4, 4})}, 0);
        },
        mesh(), {P("x", "y")}, {P("x", "y")});
    return f(x);
  }});
  out.push_back({"psum of 2 MiB per device (chunks in flight), processes interleaved along the axis", [=] {
    // Devices alternate processes along "x": the fold crosses processes at
    // every member (a chain of 8 segments with 2 processes).
    const auto d = ts::devices();
    std::vector<ts::Device> order;
    for (std::size_t k = 0; k < 4; ++k) order.push_back(d[k]), order.push_back(d[k + 4]);
    ts::Mesh m(order, "x");
    const std::int64_t per = 1 << 19;
    Array x = ts::make_array_from_callback({8 * per}, ts::NamedSharding(m, P("x")), [&](const ts::Index& idx) {
      return host_data(std::uint32_t(100 + idx[0].start / per), {per}) * float(1 + idx[0].start / per);
    });
    auto f = ts::shard_map([](const Array& b) { return ts::psum(b, "x"); }, m, {P("x")}, {P()});
    return f(x).index({ts::slice(0, 1 << 19, 4099)});
  }});
  out.push_back({"psum of 256 KiB over groups inside one process and across, then over the other axis", [=] {
    // With 2 processes the pairs along "y" are devices (0,4) (1,2) (3,5)
    // (6,7): two inside a process, two across; the groups along "x" then
    // mix members of both kinds (they must agree on their rounds).
    const auto d = ts::devices();
    ts::Mesh m({d[0], d[4], d[1], d[2], d[3], d[5], d[6], d[7]}, {4, 2}, {"x", "y"});
    const std::int64_t per = 1 << 16;
    Array x = ts::device_put(host_data(13, {4 * per, 2}), ts::NamedSharding(m, P("x", "y")));
    auto f = ts::shard_map(
        [](const Array& b) {
          Array s = ts::psum(b, "y");
          return ts::concatenate({ts::psum(s * 0.5f, "x"), ts::ppermute(s, "x", {{0, 3}, {3, 1}, {1, 2}, {2, 0}})}, 1);
        },
        m, {P("x", "y")}, {P("x")});
    return f(x).index({ts::slice(0, 4 * per, 1021)});
  }});
  out.push_back({"psum, pmax, pmin in float64 and int32; signed zeros and NaN", [=] {
    auto m = mesh();
    Array x = ts::device_put(host_data(12, {8, 40000}), ts::NamedSharding(m, P({"x", "y"}, ts::None)));
    Array z = ts::device_put(ts::array(std::vector<float>{0.0f, -0.0f, -0.0f, 0.0f, NAN, 1.0f, -0.0f, 0.0f}, {8, 1}),
                             ts::NamedSharding(m, P({"x", "y"}, ts::None)));
    auto f = ts::shard_map(
        [](const Array& b, const Array& s) {
          Array d = b.astype(ts::float64) * 1e3;
          Array i = (b * 1e6f).astype(ts::int32);
          Array sd = ts::psum(d, {"x", "y"}).astype(ts::float32);
          Array si = ts::psum(i, {"x", "y"}).astype(ts::float32);
          Array mx = ts::pmax(b, "x"), mn = ts::pmin(d, "y").astype(ts::float32);
          Array zs = ts::concatenate({ts::pmax(s, {"x", "y"}), ts::pmin(s, {"y", "x"}), ts::psum(s, "x")}, 1);
          return ts::concatenate({(sd + si + mx + mn).reshape({-1}), zs.reshape({-1})}, 0);
        },
        m, {P({"x", "y"}, ts::None), P({"x", "y"}, ts::None)}, {P({"x", "y"})});
    return f(x, z);
  }});
  out.push_back({"random programs under jit: random shardings, meshes in shuffled device order", [=] {
    namespace rp = tessel::random_program;
    std::mt19937 rng(77);  // the same draws in every process
    const std::vector<std::pair<ts::Shape, std::vector<std::string>>> meshes = {
        {{8}, {"x"}}, {{4, 2}, {"x", "y"}}, {{2, 2, 2}, {"x", "y", "z"}}, {{2, 4}, {"a", "b"}}};
    std::vector<float> all;
    for (int t = 0; t < 6; ++t) {
      const auto& [shape, names] = meshes[std::size_t(t) % meshes.size()];
      auto devs = ts::devices();
      std::shuffle(devs.begin(), devs.end(), rng);
      ts::Mesh m(devs, shape, names);
      rp::Program prog = rp::generate(rng, 20 + rp::pick(rng, 10), names);
      std::vector<Array> inputs;
      std::uniform_real_distribution<float> u(-2, 2);
      for (auto& s : prog.inputs) {
        std::vector<float> v(std::size_t(ts::numel(s)));
        for (auto& e : v) e = u(rng);
        Array a = ts::array(v, s);
        std::vector<ts::PartitionSpec::Entry> e(s.size(), ts::PartitionSpec::Entry(ts::None));
        for (auto& name : names) {
          const int d = rp::pick(rng, int(s.size()) + 1);
          if (d == int(s.size())) continue;
          auto axes = e[std::size_t(d)].axes();
          axes.push_back(name);
          e[std::size_t(d)] = ts::PartitionSpec::Entry::tuple(axes);
        }
        const bool uncommitted = rp::pick(rng, 4) == 0;
        inputs.push_back(uncommitted ? a : ts::device_put(a, ts::NamedSharding(m, ts::PartitionSpec::from_entries(e))));
      }
      auto outs = ts::jit([&](const std::vector<Array>& xs) { return rp::replay(prog, xs, m); })(inputs);
      for (auto& o : outs) {
        auto v = (o.is_fully_addressable() ? o : ts::process_allgather(o)).to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    return ts::array(all);
  }});
  out.push_back({"random normal, sharded", [=] {
    auto f = ts::jit([](const Array& k) { return ts::random::normal(k, {64, 32}); },
                     {.out_shardings = {ts::NamedSharding(mesh(), P("x", "y"))}});
    return f(ts::random::key(42));
  }});
  out.push_back({"fftn of P('x','y') (all-to-all)", [=] {
    Array v = ts::device_put(host_data(5, {16, 16, 16}).astype(ts::complex64), ts::NamedSharding(mesh(), P("x", "y")));
    return ts::jit([](const Array& a) { return ts::fft::fftn(a); })(v);
  }});
  out.push_back({"distributed lu of a tall row-split matrix, uneven (panels, pivot rows)", [=] {
    Array a = ts::device_put(host_data(6, {43, 37}), ts::NamedSharding(ts::Mesh(ts::devices(), "r"), P("r", ts::None)));
    return ts::jit([](const Array& m) { return ts::linalg::lu(m).lu; })(a);
  }});
  out.push_back({"donation across processes: a step and a loop over a split argument, deleted after", [=] {
    Array p = ts::device_put(host_data(16, {24, 8}), ts::NamedSharding(mesh(), P("x", "y")));
    Array w = host_data(17, {8, 8});
    auto step = ts::jit([w](const Array& q) { return q - 0.1f * ts::matmul(q, w); }, {.donate_argnums = {0}});
    auto loop = ts::jit([](const Array& q) {
      return ts::lax::fori_loop(0, 3, [](const Array&, const Array& v) { return v * 0.5f + ts::sum(v, 0); }, q);
    }, {.donate_argnums = {0}});
    Array q = step(p);
    Array r = loop(q);
    // Whether the blocks were reused depends on timing here (a launch takes a block
    // only once the run that wrote it has let go, waiting at most 10 ms: 4 processes
    // share 2 cores); tests/dsl/donation_test.cpp checks the reuse.
    if (!p.is_deleted() || !q.is_deleted()) throw std::runtime_error("a donated argument was not deleted");
    return r;
  }});
  out.push_back({"distributed lu of a complex row-split matrix, uneven (the library's complex products)", [=] {
    Array re = host_data(14, {29, 29}), im = host_data(15, {29, 29});
    Array c = re.astype(ts::complex64) + im.astype(ts::complex64) * ts::array(std::complex<float>(0, 1));
    Array a = ts::device_put(c, ts::NamedSharding(ts::Mesh(ts::devices(), "r"), P("r", ts::None)));
    return ts::jit([](const Array& m) { return ts::linalg::lu(m).lu; })(a);
  }});
  out.push_back({"distributed cholesky and solve of a row-split matrix, uneven (panels across processes)", [=] {
    Array m = host_data(11, {43, 43});
    Array s = ts::matmul(m, m.T()) + ts::eye(43) * 43.0f;
    Array sd = ts::device_put(s, ts::NamedSharding(ts::Mesh(ts::devices(), "r"), P("r", ts::None)));
    Array L = ts::jit([](const Array& a) { return ts::linalg::cholesky(a, false, false); })(sd);
    Array x = ts::jit([](const Array& a, const Array& b) { return ts::linalg::solve(a, b); })(sd, host_data(12, {43}));
    // L^T y = c, L split by rows: each block's residual summed from every process's part.
    Array y = ts::jit([](const Array& l, const Array& c) {
      return ts::linalg::triangular_solve(l, c, {.left_side = true, .lower = true, .transpose_a = true});
    })(L, host_data(13, {43, 2}));
    return ts::concatenate({L.reshape({-1}), x, y.reshape({-1})}, 0);
  }});
  out.push_back({"MLP step, data-parallel x model-parallel (4x2)", [=] {
    auto m = mesh();
    Array w1 = ts::device_put(host_data(7, {16, 32}) * 0.3f, ts::NamedSharding(m, P(ts::None, "y")));
    Array w2 = ts::device_put(host_data(8, {32, 4}) * 0.3f, ts::NamedSharding(m, P("y", ts::None)));
    Array xb = ts::device_put(host_data(9, {64, 16}), ts::NamedSharding(m, P("x", ts::None)));
    Array yb = ts::device_put(host_data(10, {64, 4}), ts::NamedSharding(m, P("x", ts::None)));
    using Params = std::pair<Array, Array>;
    auto loss = [](const Params& p, const Array& x, const Array& y) {
      Array h = ts::tanh(ts::matmul(x, p.first));
      Array d = ts::matmul(h, p.second) - y;
      return ts::mean(d * d);
    };
    auto step = ts::jit([loss](const Array& a, const Array& b, const Array& x, const Array& y) {
      auto [l, g] = ts::value_and_grad(loss)(Params{a, b}, x, y);
      return std::make_tuple(a - g.first * 0.1f, b - g.second * 0.1f, l);
    });
    Array losses = ts::zeros({0});
    for (int i = 0; i < 3; ++i) {
      auto [na, nb, l] = step(w1, w2, xb, yb);
      w1 = na;
      w2 = nb;
      losses = ts::concatenate({losses, l.reshape({1})}, 0);
    }
    return ts::concatenate({losses, w1.reshape({-1}), w2.reshape({-1})}, 0);
  }});
  return out;
}

}  // namespace tessel::mpi_test
