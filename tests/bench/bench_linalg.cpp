// solve(A, b) for one n x n matrix (n = 4096; `small`: 1024), float32 and
// float64: on 1 device, and on 8 devices with A split by rows (P('x', None))
// and 2-D (P('x', 'y') on 4 x 2): the distributed LU and triangular solves
// (distributed-lu, distributed-triangular-solve: codegen/lapack_distributed.cpp). The peer is LAPACK's gesv
// called directly (the same serial OpenBLAS, one core), the floor the solve's flops
// (2/3 n^3 + 2 n^2) at the peak FMA rate of every core, measured here (float32 FMAs;
// float64 at half the lanes).
#include <algorithm>
#include <chrono>
#include <cstring>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

extern "C" {
void sgesv_(const int*, const int*, float*, const int*, int*, float*, const int*, int*);
void dgesv_(const int*, const int*, double*, const int*, int*, double*, const int*, int*);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void spotrf_(const char*, const int*, float*, const int*, int*, std::size_t);
void dpotrf_(const char*, const int*, double*, const int*, int*, std::size_t);
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*, const int*, int*);
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*, int*, const int*, int*,
             std::size_t, std::size_t);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*, float*, const int*,
             float*, const int*, int*, int*, std::size_t);
}

namespace ts = tessel;
using ts::P;

namespace {

// The median of `reps` timings of run(inputs), each on fresh inputs from
// prepare() (not timed), after `warmup` untimed runs.
template <class Prepare, class Run>
double median_seconds(int reps, int warmup, Prepare prepare, Run run) {
  std::vector<double> times;
  for (int r = 0; r < warmup + reps; ++r) {
    auto inputs = prepare();
    auto t0 = std::chrono::steady_clock::now();
    run(inputs);
    if (r >= warmup) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// LAPACK's gesv on a column-major copy of A, one warm-up run.
template <class T>
double lapack_seconds(const std::vector<T>& a_row, const std::vector<T>& b, int n, int reps) {
  struct Inputs {
    std::vector<T> a, x;
    std::vector<int> ipiv;
  };
  return median_seconds(
      reps, 1,
      [&] {
        Inputs in{std::vector<T>(a_row.size()), b, std::vector<int>(static_cast<size_t>(n))};
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) in.a[size_t(j) * n + i] = a_row[size_t(i) * n + j];
        return in;
      },
      [&](Inputs& in) {
        int one = 1, info = 0;
        if constexpr (std::is_same_v<T, float>) sgesv_(&n, &one, in.a.data(), &n, in.ipiv.data(), in.x.data(), &n, &info);
        else dgesv_(&n, &one, in.a.data(), &n, in.ipiv.data(), in.x.data(), &n, &info);
      });
}

// LAPACK's inverse (getrf then getri) of A read as column-major (A^T: the
// same work), and its Cholesky (potrf) of a symmetric A, called directly.
template <class T>
double lapack_inv_seconds(const std::vector<T>& a_row, int n, int reps) {
  return median_seconds(
      reps, 0, [&] { return a_row; },
      [&](std::vector<T>& a) {
        std::vector<T> work(size_t(n) * 64);
        std::vector<int> ipiv(static_cast<size_t>(n));
        int info = 0, lw = int(work.size());
        if constexpr (std::is_same_v<T, float>) {
          sgetrf_(&n, &n, a.data(), &n, ipiv.data(), &info);
          sgetri_(&n, a.data(), &n, ipiv.data(), work.data(), &lw, &info);
        } else {
          dgetrf_(&n, &n, a.data(), &n, ipiv.data(), &info);
          dgetri_(&n, a.data(), &n, ipiv.data(), work.data(), &lw, &info);
        }
      });
}
template <class T>
double lapack_cholesky_seconds(const std::vector<T>& a_row, int n, int reps) {
  return median_seconds(
      reps, 0, [&] { return a_row; },
      [&](std::vector<T>& a) {
        int info = 0;
        const char u = 'L';
        if constexpr (std::is_same_v<T, float>) spotrf_(&u, &n, a.data(), &n, &info, 1);
        else dpotrf_(&u, &n, a.data(), &n, &info, 1);
      });
}

// qr (geqrf then orgqr), eigh (syevd, vectors) and svd (gesdd, all
// vectors) of an n x n float32 matrix, LAPACK called directly on a
// column-major copy (the copy not timed), workspaces queried first.
enum class Factor { qr, eigh, svd };
double lapack_factor_seconds(Factor f, const std::vector<float>& a_row, int n, int reps) {
  return median_seconds(
      reps, 0,
      [&] {
        std::vector<float> a(a_row.size());
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) a[size_t(j) * n + i] = a_row[size_t(i) * n + j];
        return a;
      },
      [&](std::vector<float>& a) {
        int info = 0, lw = -1;
        float wq = 0;
        std::vector<float> w(static_cast<size_t>(n)), work;
        if (f == Factor::qr) {
          sgeqrf_(&n, &n, a.data(), &n, w.data(), &wq, &lw, &info);
          work.resize(size_t(wq)), lw = int(wq);
          sgeqrf_(&n, &n, a.data(), &n, w.data(), work.data(), &lw, &info);
          lw = -1;
          sorgqr_(&n, &n, &n, a.data(), &n, w.data(), &wq, &lw, &info);
          work.resize(size_t(wq)), lw = int(wq);
          sorgqr_(&n, &n, &n, a.data(), &n, w.data(), work.data(), &lw, &info);
        } else if (f == Factor::eigh) {
          int iwq = 0, liw = -1;
          ssyevd_("V", "L", &n, a.data(), &n, w.data(), &wq, &lw, &iwq, &liw, &info, 1, 1);
          work.resize(size_t(wq)), lw = int(wq);
          std::vector<int> iwork(static_cast<size_t>(iwq));
          liw = iwq;
          ssyevd_("V", "L", &n, a.data(), &n, w.data(), work.data(), &lw, iwork.data(), &liw, &info, 1, 1);
        } else {
          std::vector<float> u(size_t(n) * n), vt(size_t(n) * n);
          std::vector<int> iwork(size_t(8) * n);
          sgesdd_("A", &n, &n, a.data(), &n, w.data(), u.data(), &n, vt.data(), &n, &wq, &lw, iwork.data(), &info, 1);
          work.resize(size_t(wq)), lw = int(wq);
          sgesdd_("A", &n, &n, a.data(), &n, w.data(), u.data(), &n, vt.data(), &n, work.data(), &lw, iwork.data(), &info,
                  1);
        }
      });
}

void row(const std::string& name, double floor, double ours, double peer) {
  bench::check(name, floor, ours);
  std::printf("%-46s %11.1f %11.1f %8.2f %11.1f %8.2f\n", name.c_str(), floor * 1e3, ours * 1e3, ours / floor, peer * 1e3,
              ours / peer);
  std::fflush(stdout);
}

// A small matrix on 8 devices: many panel steps, each a few meetings of the
// group, so what a meeting costs shows. With more device threads than cores
// a launch runs in lockstep (one thread runs every member's phases, no
// meeting: RowBlockedThunk::run_all); the devices' own threads meet through
// the communicator (ts::config().lockstep_launches = false), both in this run.
void small_matrices() {
  const int n = 256, reps = 10;
  const double flops = 2.0 / 3 * double(n) * n * n + 2.0 * n * n;
  std::printf("\nsolve(A, b), A %d x %d on 8 devices: lockstep against the devices' own threads\n", n, n);
  std::printf("%-46s %11s %11s %8s %11s %8s %12s\n", "case", "floor (ms)", "tessel (ms)", "x floor", "gesv (ms)", "x gesv",
              "threads (ms)");
  const auto all = ts::devices();
  if (all.size() < 8) return;
  for (ts::DType t : {ts::float32, ts::float64}) {
    double floor = flops / (bench::peak_flops() / (t == ts::float64 ? 2 : 1));
    ts::Array a = (ts::random::normal(ts::random::key(2), {n, n}, ts::float64) +
                   ts::eye(n, std::nullopt, 0, ts::float64) * 4.0).astype(t);
    ts::Array b = ts::random::normal(ts::random::key(3), {n}, ts::float64).astype(t);
    const double peer = t == ts::float32 ? lapack_seconds(a.to_vector<float>(), b.to_vector<float>(), n, reps)
                                         : lapack_seconds(a.to_vector<double>(), b.to_vector<double>(), n, reps);
    auto solve = ts::jit([](const ts::Array& a, const ts::Array& b) { return ts::linalg::solve(a, b); });
    for (const auto& [name, sh] :
         {std::pair{std::string("8 devices, rows P('x', None)"), ts::NamedSharding(ts::Mesh(all, {8}, {"x"}), P("x", ts::None))},
          std::pair{std::string("8 devices, 2-D P('x', 'y') on 4 x 2"),
                    ts::NamedSharding(ts::Mesh(all, {4, 2}, {"x", "y"}), P("x", "y"))}}) {
      ts::Array ad = ts::device_put(a, sh), bd = ts::device_put(b, ts::NamedSharding(sh.mesh(), P()));
      solve(ad, bd).block_until_ready();  // compile
      double ours = bench::seconds([&] { solve(ad, bd).block_until_ready(); }, reps, 0);
      ts::config().lockstep_launches = false;
      const double threads = bench::seconds([&] { solve(ad, bd).block_until_ready(); }, reps, 0);
      ts::config().lockstep_launches = true;
      const std::string case_name = std::string(ts::dtype_name(t)) + ", " + name;
      bench::check(case_name, floor, ours);
      std::printf("%-46s %11.2f %11.2f %8.2f %11.2f %8.2f %12.2f\n", case_name.c_str(), floor * 1e3, ours * 1e3, ours / floor,
                  peer * 1e3, ours / peer, threads * 1e3);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  small_matrices();
  const int n = argc > 1 && std::strcmp(argv[1], "small") == 0 ? 1024 : 4096;
  const int reps = 3;
  const double flops = 2.0 / 3 * double(n) * n * n + 2.0 * n * n;
  std::printf("\nsolve(A, b), A %d x %d (peak %.0f float32 GFLOP/s on %d cores measured here; float64 half)\n", n, n,
              bench::peak_flops() / 1e9, bench::cores());
  std::printf("%-46s %11s %11s %8s %11s %8s\n", "case", "floor (ms)", "tessel (ms)", "x floor", "gesv (ms)", "x gesv");
  const auto all = ts::devices();
  for (ts::DType t : {ts::float32, ts::float64}) {
    const double floor = flops / (bench::peak_flops() / (t == ts::float64 ? 2 : 1));
    ts::Array a = (ts::random::normal(ts::random::key(0), {n, n}, ts::float64) +
                   ts::eye(n, std::nullopt, 0, ts::float64) * 4.0).astype(t);
    ts::Array b = ts::random::normal(ts::random::key(1), {n}, ts::float64).astype(t);
    double peer;
    if (t == ts::float32) peer = lapack_seconds(a.to_vector<float>(), b.to_vector<float>(), n, reps);
    else peer = lapack_seconds(a.to_vector<double>(), b.to_vector<double>(), n, reps);
    auto solve = ts::jit([](const ts::Array& a, const ts::Array& b) { return ts::linalg::solve(a, b); });
    struct Case {
      std::string name;
      ts::NamedSharding sh;
    };
    std::vector<Case> cases{{"1 device", ts::NamedSharding(ts::Mesh({all[0]}, {1}, {"x"}), P())},
                            {"8 devices, rows P('x', None)", ts::NamedSharding(ts::Mesh(all, {8}, {"x"}), P("x", ts::None))},
                            {"8 devices, 2-D P('x', 'y') on 4 x 2", ts::NamedSharding(ts::Mesh(all, {4, 2}, {"x", "y"}), P("x", "y"))}};
    for (auto& c : cases) {
      if (c.name != "1 device" && all.size() < 8) continue;
      ts::Array ad = ts::device_put(a, c.sh), bd = ts::device_put(b, ts::NamedSharding(c.sh.mesh(), P()));
      solve(ad, bd).block_until_ready();  // compile
      const double ours = bench::seconds([&] { solve(ad, bd).block_until_ready(); }, reps, 0);
      row(std::string(ts::dtype_name(t)) + ", " + c.name, floor, ours, peer);
    }
  }
  // inv (lu, then two triangular solves with n right-hand sides: 8/3 n^3
  // flops; the floor counts the 2 n^3 of LAPACK's getri route) and cholesky
  // (n^3 / 3), one device; the peers LAPACK's getrf + getri and potrf.
  std::printf("\n%-46s %11s %11s %8s %11s %8s\n", "inv and cholesky, 1 device", "floor (ms)", "tessel (ms)", "x floor",
              "LAPACK (ms)", "x LAPACK");
  for (ts::DType t : {ts::float32, ts::float64}) {
    const double rate = bench::peak_flops() / (t == ts::float64 ? 2 : 1);
    ts::Array a = (ts::random::normal(ts::random::key(4), {n, n}, ts::float64) +
                   ts::eye(n, std::nullopt, 0, ts::float64) * 4.0).astype(t);
    ts::Array g = ts::random::normal(ts::random::key(5), {n, n}, ts::float64);
    ts::Array s = (ts::matmul(g, g.T()) / double(n) + ts::eye(n, std::nullopt, 0, ts::float64)).astype(t);
    auto inv = ts::jit([](const ts::Array& x) { return ts::linalg::inv(x); });
    auto chol = ts::jit([](const ts::Array& x) { return ts::linalg::cholesky(x, false, false); });
    inv(a).block_until_ready();
    chol(s).block_until_ready();
    const double inv_ours = bench::seconds([&] { inv(a).block_until_ready(); }, 2, 0);
    const double chol_ours = bench::seconds([&] { chol(s).block_until_ready(); }, reps, 0);
    double inv_peer, chol_peer;
    if (t == ts::float32) {
      inv_peer = lapack_inv_seconds(a.to_vector<float>(), n, 2);
      chol_peer = lapack_cholesky_seconds(s.to_vector<float>(), n, reps);
    } else {
      inv_peer = lapack_inv_seconds(a.to_vector<double>(), n, 2);
      chol_peer = lapack_cholesky_seconds(s.to_vector<double>(), n, reps);
    }
    const double nn = double(n) * n * n;
    row(std::string("inv ") + ts::dtype_name(t), 2 * nn / rate, inv_ours, inv_peer);
    row(std::string("cholesky ") + ts::dtype_name(t), nn / 3 / rate, chol_ours, chol_peer);
  }
  // qr, eigh and svd of an n/4 x n/4 float32 matrix, one device. Floors:
  // flops no algorithm does less of, at the peak rate: qr's Householder
  // vectors and Q (8/3 m^3), eigh's reduction to tridiagonal (4/3 m^3),
  // svd's to bidiagonal (8/3 m^3).
  {
    const int m = n / 4;
    std::printf("\n%-46s %11s %11s %8s %11s %8s\n", ("qr, eigh, svd " + std::to_string(m) + "^2, 1 device").c_str(),
                "floor (ms)", "tessel (ms)", "x floor", "LAPACK (ms)", "x LAPACK");
    ts::Array a = ts::random::normal(ts::random::key(6), {m, m}, ts::float32);
    ts::Array sym = ((a + a.T()) * 0.5f).block_until_ready();
    const double mm = double(m) * m * m, rate = bench::peak_flops();
    auto qr = ts::jit([](const ts::Array& x) { return ts::linalg::qr(x).r; });
    auto eigh = ts::jit([](const ts::Array& x) { return ts::linalg::eigh(x).eigenvectors; });
    auto svd = ts::jit([](const ts::Array& x) { return ts::linalg::svd(x).u; });
    qr(a).block_until_ready();
    eigh(sym).block_until_ready();
    svd(a).block_until_ready();
    row("qr float32 (reduced: geqrf + orgqr)", 8.0 / 3 * mm / rate, bench::seconds([&] { qr(a).block_until_ready(); }, reps, 0),
        lapack_factor_seconds(Factor::qr, a.to_vector<float>(), m, reps));
    row("eigh float32 (syevd)", 4.0 / 3 * mm / rate, bench::seconds([&] { eigh(sym).block_until_ready(); }, reps, 0),
        lapack_factor_seconds(Factor::eigh, sym.to_vector<float>(), m, reps));
    row("svd float32 (gesdd, all vectors)", 8.0 / 3 * mm / rate, bench::seconds([&] { svd(a).block_until_ready(); }, reps, 0),
        lapack_factor_seconds(Factor::svd, a.to_vector<float>(), m, reps));
  }
  return bench::status();
}
