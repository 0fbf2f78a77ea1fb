// The exercise notebook's bonus cells in C++. Distributed FFT: fftn of a
// 16x16x16 volume split P('x', 'y') over a 4 x 2 mesh, where JAX all-gathers
// it and returns it replicated; tessel transforms it in pencils (all-to-alls
// moving the split, never gathering the volume) and returns it split like
// its input, not transposed (jaxdecomp's pfft3d returns fftn(x).transpose(1,
// 2, 0)); the same on a 1 x 8 mesh with P(None, 'y').
// Linear algebra: Exercise 2 (8
// systems of 16 x 16 solved on 8 devices, by shard_map and by jit, x split
// like the batch) and the bonus "Distributed Linear Solver", where JAX
// all-gathers a row-split A and returns x replicated ("distributed LU
// decomposition is not implemented"). tessel factorises the split matrix
// where it lies: a blocked LU whose panel steps move one panel of columns
// and the pivot rows, never the matrix; cholesky likewise, on a 2-D split.
//
//   ./tessel run samples/fft_linalg.cpp
#include <tessel/tessel.hpp>

#include <cmath>
#include <iostream>
#include <sstream>
#include <string>

namespace ts = tessel;
namespace la = tessel::linalg;
using ts::P;

namespace {

void section(const std::string& s) { std::cout << "\n== " << s << " ==\n"; }

// The largest all-gather of a compiled program, in elements, from its thunk
// list ("all-gather f32[2,8] -> f32[16,8]"); 0 when it has none.
std::int64_t largest_all_gather(const std::string& text) {
  std::istringstream is(text);
  std::string line;
  std::int64_t most = 0;
  while (std::getline(is, line)) {
    const auto at = line.find("all-gather");
    const auto arrow = line.find("->");
    if (at == std::string::npos || arrow == std::string::npos) continue;
    std::string shape = line.substr(line.find('[', arrow) + 1);
    shape = shape.substr(0, shape.find(']'));
    std::int64_t elems = 1;
    std::istringstream dims(shape);
    for (std::string d; std::getline(dims, d, ',');) elems *= std::stoll(d);
    most = std::max(most, elems);
  }
  return most;
}

bool close(const ts::Array& a, const ts::Array& b, double tol) { return ts::allclose(a, b, tol, tol).item<bool>(); }

}  // namespace

int main() {
  std::cout << std::unitbuf;
  if (ts::device_count() < 8) {
    std::cerr << "this sample needs 8 devices (TESSEL_DEVICE_COUNT=8, the default)\n";
    return 2;
  }
  bool ok = true;
  auto check = [&](bool c, const std::string& what) {
    std::cout << (c ? "  ok: " : "  FAILED: ") << what << "\n";
    ok = ok && c;
  };

  section("Distributed Fast Fourier Transform");
  for (auto [shape, spec] : std::vector<std::pair<std::vector<std::int64_t>, P>>{{{4, 2}, P("x", "y")},
                                                                                   {{1, 8}, P(ts::None, "y")}}) {
    ts::Mesh fmesh = ts::make_mesh(shape, {"x", "y"});
    ts::NamedSharding fsharding(fmesh, spec);
    ts::Array V = ts::random::normal(ts::random::key(0), {16, 16, 16});
    ts::Array V_sharded = ts::with_sharding_constraint(V, fsharding);
    ts::Array local_fft = ts::fft::fftn(V);
    ts::Array global_fft = ts::fft::fftn(V_sharded);
    std::cout << "mesh " << fmesh << ", " << fsharding.spec() << "\n";
    check(ts::allclose(global_fft, local_fft, 1e-4, 1e-4).item<bool>(), "the sharded fftn equals the local one");
    ts::debug::visualize_array_sharding(V_sharded.index({ts::ellipsis, 0}));
    ts::debug::visualize_array_sharding(global_fft.index({ts::ellipsis, 0}));
    check(global_fft.sharding().is_equivalent_to(fsharding, 3), "the output is split like the input: " + global_fft.sharding().str());
    auto fftn = ts::jit([](ts::Array a) { return ts::fft::fftn(a); });
    const std::string local_text = fftn.lower(V).compile().as_text(), text = fftn.lower(V_sharded).compile().as_text();
    std::cout << "Running a FFT on a local array does an all gather : "
              << (local_text.find("all-gather") != std::string::npos ? "True" : "False") << "\n";
    std::cout << "Running a FFT on a sharded array does an all gather : "
              << (text.find("all-gather") != std::string::npos ? "True" : "False") << "\n";
    check(text.find("all-gather") == std::string::npos && text.find("all-to-all") != std::string::npos,
          "pencils: all-to-alls move the split, nothing is gathered");
  }

  section("Exercise 2: batching linear solvers across devices");
  std::vector<ts::Array> As, bs;
  for (int i = 0; i < 8; ++i) {
    As.push_back(ts::random::normal(ts::random::key(std::uint32_t(i)), {16, 16}));
    bs.push_back(ts::random::normal(ts::random::key(std::uint32_t(i + 8)), {16}));
  }
  ts::Mesh mesh(ts::devices(), {8}, {"x"});
  ts::NamedSharding sharding(mesh, P("x"));
  ts::Array As_sharded = ts::with_sharding_constraint(ts::stack(As), sharding);
  ts::Array bs_sharded = ts::with_sharding_constraint(ts::stack(bs), sharding);
  auto batch_solvers = ts::shard_map([](ts::Array A, ts::Array b) { return ts::vmap(la::solve)(A, b); }, mesh,
                                     {P("x"), P("x")}, P("x"));
  ts::Array x_sharded = batch_solvers(As_sharded, bs_sharded);
  ts::debug::visualize_array_sharding(x_sharded);
  bool all_close = true;
  for (int i = 0; i < 8; ++i)
    all_close = all_close && close(ts::dot(As[size_t(i)], x_sharded.index({i})), bs[size_t(i)], 1e-4);
  check(all_close, "A_i @ x_i == b_i for the 8 systems (shard_map)");
  auto jitted = ts::jit([](ts::Array A, ts::Array b) { return ts::vmap(la::solve)(A, b); });
  ts::Array x_jit = jitted(As_sharded, bs_sharded);
  check(close(x_jit, x_sharded, 1e-5) && x_jit.sharding().is_equivalent_to(sharding, 2),
        "jit gives the same x, split like the batch: " + x_jit.sharding().str());
  const std::string batch_text = jitted.lower(As_sharded, bs_sharded).compile().as_text();
  check(batch_text.find("all-") == std::string::npos && batch_text.find("collective") == std::string::npos,
        "no communication: each device solves its own system");

  section("Distributed linear solver");
  ts::Array A = ts::random::normal(ts::random::key(0), {16, 16});
  ts::Array b = ts::random::normal(ts::random::key(1), {16});
  ts::Array x = la::solve(A, b);
  check(close(ts::dot(A, x), b, 1e-5), "solve(A, b) on one device: A @ x == b");
  ts::Mesh mesh81 = ts::make_mesh({8, 1}, {"x", "y"});
  ts::NamedSharding rows(mesh81, P("x", ts::None));
  A = ts::with_sharding_constraint(A, rows);
  ts::debug::visualize_array_sharding(A);
  auto solve = ts::jit([](ts::Array A, ts::Array b) { return la::solve(A, b); });
  x = solve(A, b);
  check(close(ts::dot(A, x), b, 1e-5), "solve(A, b) with A split by rows: A @ x == b");
  ts::debug::visualize_array_sharding(x);
  const std::string solve_text = solve.lower(A, b).compile().as_text();
  auto lu = ts::jit([](ts::Array A) { return la::lu(A).lu; });
  const std::string lu_text = lu.lower(A).compile().as_text();
  std::cout << "Does the linear solve gather the matrix : " << (largest_all_gather(solve_text) >= 16 * 16 ? "True" : "False")
            << " (it runs " << (solve_text.find("distributed-lu") != std::string::npos ? "distributed-lu" : "no distributed LU")
            << ", which moves panels and pivot rows, never the matrix)\n";
  std::cout << "Does the LU decomposition gather the matrix : " << (largest_all_gather(lu_text) >= 16 * 16 ? "True" : "False")
            << "\n";
  check(largest_all_gather(solve_text) < 256 && largest_all_gather(lu_text) < 256 &&
            lu_text.find("distributed-lu") != std::string::npos,
        "the matrix is never gathered (the LU is factorised where it lies)");
  ts::Array lu_split = lu(A);
  check(lu_split.sharding().is_equivalent_to(rows, 2), "lu comes out split like A: " + lu_split.sharding().str());
  check(close(lu_split, la::lu(ts::random::normal(ts::random::key(0), {16, 16})).lu, 1e-5),
        "and equals the single-device lu (the same pivots)");

  section("Cholesky of a matrix split 2-D over a 4 x 2 mesh");
  ts::Mesh mesh42 = ts::make_mesh({4, 2}, {"x", "y"});
  ts::Array M = ts::random::normal(ts::random::key(2), {32, 32});
  ts::Array S = ts::matmul(M, M.T()) + ts::eye(32) * 32.0f;
  ts::Array S2 = ts::device_put(S, ts::NamedSharding(mesh42, P("x", "y")));
  auto chol = ts::jit([](ts::Array s) { return la::cholesky(s, false, /*symmetrize_input=*/false); });
  ts::Array L = chol(S2);
  ts::debug::visualize_array_sharding(L);
  check(close(ts::matmul(L, L.T()), S, 1e-3), "L @ L.T == S, L split like S: " + L.sharding().str());
  check(largest_all_gather(chol.lower(S2).compile().as_text()) < 32 * 32, "the matrix is never gathered");

  std::cout << (ok ? "\nAll checks passed\n" : "\nSome checks FAILED\n");
  return ok ? 0 : 1;
}
