// The exercise notebook's linear-algebra cells in C++: Exercise 2 (8
// systems of 16 x 16 solved on 8 devices, by shard_map and by jit, x split
// like the batch) and the bonus "Distributed Linear Solver", where JAX
// all-gathers a row-split A and returns x replicated ("distributed LU
// decomposition is not implemented"). tessel factorises the split matrix
// where it lies: a blocked LU whose panel steps move one panel of columns
// and the pivot rows, never the matrix; cholesky likewise, on a 2-D split.
// (The notebook's FFT cells need complex dtypes: a later issue step.)
//
//   ./tessel run samples/linalg.cpp
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
            << " (its largest all-gather: " << largest_all_gather(solve_text) << " of 256 elements, a panel)\n";
  std::cout << "Does the LU decomposition gather the matrix : " << (largest_all_gather(lu_text) >= 16 * 16 ? "True" : "False")
            << "\n";
  check(largest_all_gather(solve_text) < 256 && largest_all_gather(lu_text) < 256, "the matrix is never gathered");
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
