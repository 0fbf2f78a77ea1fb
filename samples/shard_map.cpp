// The seed tutorials' manual parallelism in C++: "Manual parallelism with
// shard_map" and "Comparing the three approaches" (sharded_computation_intro),
// and the exercise notebook's matrix products written with shard_map, each
// checked against jit's product: the same values and the same sharding.
//
//   ./tessel run samples/shard_map.cpp
#include <tessel/tessel.hpp>

#include <cmath>
#include <iostream>

namespace ts = tessel;
using ts::P;

namespace {

void section(const std::string& title) { std::cout << "\n## " << title << "\n\n"; }

double max_abs_diff(const ts::Array& a, const ts::Array& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - double(y[i])));
  return m;
}

int collectives(const std::string& compiled_text) {
  int n = 0;
  for (const char* c : {"all-gather(", "all-reduce(", "reduce-scatter(", "all-to-all(", "collective-permute("}) {
    for (size_t p = compiled_text.find(c); p != std::string::npos; p = compiled_text.find(c, p + 1)) ++n;
  }
  return n;
}

// The notebook's two asserts: allclose and the same sharding as jit's product.
bool agree(const std::string& what, const ts::Array& manual, const ts::Array& automatic) {
  const double diff = max_abs_diff(manual, automatic);
  const bool same_sharding = manual.sharding() == automatic.sharding();
  std::cout << what << ": max |shard_map - jit| = " << diff << ", shardings "
            << (same_sharding ? "match: " : "DIFFER: ") << manual.sharding().str()
            << (same_sharding ? "" : " vs " + automatic.sharding().str()) << "\n";
  return diff <= 1e-4 && same_sharding;
}

}  // namespace

int main() {
  std::cout << std::unitbuf;
  if (ts::device_count() < 8) {
    std::cerr << "this sample needs 8 devices (TESSEL_DEVICE_COUNT=8, the default)\n";
    return 2;
  }
  bool ok = true;
  section("Manual parallelism with shard_map");
  auto mesh = ts::Mesh(ts::devices(), {8}, {"x"});
  auto f_elementwise = [](ts::Array x) { return 2.0 * ts::sin(x) + 1.0; };
  auto f_elementwise_sharded = ts::shard_map(f_elementwise, mesh, P("x"), P("x"));
  ts::Array arr = ts::arange(32);
  std::cout << f_elementwise_sharded(arr) << "\n";

  ts::Array x = ts::arange(32);
  std::cout << "global shape: x.shape=" << ts::shape_str(x.shape()) << "\n";
  auto f = [](ts::Array x) {
    std::cout << "device local shape: x.shape=" << ts::shape_str(x.shape()) << "\n";
    return x * 2;
  };
  ts::Array y = ts::shard_map(f, mesh, P("x"), P("x"))(x);

  auto f_sum = [](ts::Array x) { return ts::sum(x, {}, true); };
  ts::Array sums = ts::shard_map(f_sum, mesh, P("x"), P("x"))(x);
  std::cout << sums << "\n";
  auto f_psum = [](ts::Array x) {
    ts::Array sum_in_shard = ts::sum(x);
    return ts::psum(sum_in_shard, "x");
  };
  ts::Array total = ts::shard_map(f_psum, mesh, P("x"), P())(x);
  std::cout << total << "\n";
  ok = ok && total.to_vector<int>() == std::vector<int>{496} &&
       sums.to_vector<int>() == std::vector<int>{6, 22, 38, 54, 70, 86, 102, 118};

  section("Comparing the three approaches");
  auto layer = [](ts::Array x, ts::Array weights, ts::Array bias) {
    return ts::nn::sigmoid(ts::matmul(x, weights) + bias);
  };
  auto key = ts::random::split(ts::random::key(0), 3);
  ts::Array xv = ts::random::normal(key.index({0}), {32});
  ts::Array weights = ts::random::normal(key.index({1}), {32, 4});
  ts::Array bias = ts::random::normal(key.index({2}), {4});
  ts::Array plain = ts::jit(layer)(xv, weights, bias);
  std::cout << "layer(x, weights, bias):\n" << plain << "\n";
  auto sharding = ts::NamedSharding(mesh, P("x"));
  ts::Array auto_par = ts::jit(layer)(ts::device_put(xv, sharding), ts::device_put(weights, sharding), bias);
  auto layer_auto = ts::jit([&](ts::Array x, ts::Array w, ts::Array b) {
    return layer(ts::with_sharding_constraint(x, sharding), ts::with_sharding_constraint(w, sharding), b);
  });
  ts::Array semi = layer_auto(xv, weights, bias);
  auto layer_sharded = ts::jit(ts::shard_map(
      [](ts::Array x, ts::Array w, ts::Array b) { return ts::nn::sigmoid(ts::psum(ts::matmul(x, w), "x") + b); },
      mesh, {P("x"), P("x", ts::None), P(ts::None)}, P(ts::None)));
  ts::Array manual = layer_sharded(xv, weights, bias);
  std::cout << "jit on sharded inputs:\n" << auto_par << "\nwith_sharding_constraint:\n" << semi
            << "\nshard_map + psum:\n" << manual << "\n";
  const double d = std::max({max_abs_diff(auto_par, plain), max_abs_diff(semi, plain), max_abs_diff(manual, plain)});
  std::cout << "the three agree with the plain layer to " << d << "\n";
  ok = ok && d < 1e-5;

  section("Exercise 3.1: matrix multiplication with shard_map");
  auto mesh2 = ts::make_mesh({4, 2}, {"x", "y"});
  ts::Array A = ts::random::normal(ts::random::key(0), {16, 16});
  ts::Array B = ts::random::normal(ts::random::key(1), {16, 16});
  auto a_sharding = ts::NamedSharding(mesh2, P("x"));
  auto b_sharding = ts::NamedSharding(mesh2, P(ts::None, "y"));
  auto fully_replicated = ts::NamedSharding(mesh2, P());
  ts::Array A_sharded = ts::with_sharding_constraint(A, a_sharding);
  ts::Array B_sharded = ts::with_sharding_constraint(B, b_sharding);
  ts::Array A_replicated = ts::with_sharding_constraint(A, fully_replicated);
  ts::Array B_replicated = ts::with_sharding_constraint(B, fully_replicated);
  auto matmul = [](ts::Array a, ts::Array b) { return ts::matmul(a, b); };
  auto row_col_matmul = ts::shard_map(matmul, mesh2, {P("x", ts::None), P(ts::None, "y")}, P("x", "y"));
  auto row_replicated_matmul = ts::shard_map(matmul, mesh2, {P("x", ts::None), P()}, P("x", ts::None));
  auto replicated_col_matmul = ts::shard_map(matmul, mesh2, {P(), P(ts::None, "y")}, P(ts::None, "y"));
  ok = agree("A rows x B columns", row_col_matmul(A_sharded, B_sharded), ts::matmul(A_sharded, B_sharded)) && ok;
  ok = agree("A rows x B replicated", row_replicated_matmul(A_sharded, B_replicated),
             ts::matmul(A_sharded, B_replicated)) && ok;
  ok = agree("A replicated x B columns", replicated_col_matmul(A_replicated, B_sharded),
             ts::matmul(A_replicated, B_sharded)) && ok;

  section("Exercise 3.2: block-partitioned x row-partitioned, with the collective it needs");
  ts::Array A_block_sharded = ts::with_sharding_constraint(A, ts::NamedSharding(mesh2, P("x", "y")));
  ts::Array B_row_sharded = ts::with_sharding_constraint(B, ts::NamedSharding(mesh2, P("y", ts::None)));
  // Each device holds A[x-block, y-block] and B[y-block, :]: its product is a
  // partial sum over y, which psum completes.
  auto A_block_matmul = ts::shard_map([](ts::Array a, ts::Array b) { return ts::psum(ts::matmul(a, b), "y"); },
                                      mesh2, {P("x", "y"), P("y", ts::None)}, P("x", ts::None));
  ok = agree("A blocks x B rows (psum over y)", A_block_matmul(A_block_sharded, B_row_sharded),
             ts::matmul(A_block_sharded, B_row_sharded)) && ok;
  auto compiled = ts::jit(A_block_matmul).lower(A_block_sharded, B_row_sharded).compile();
  std::cout << "collectives in the compiled program: " << collectives(compiled.as_text()) << "\n";

  section("Exercise 3.3: A @ B @ C @ D with the fewest collectives");
  ts::Array C = ts::random::normal(ts::random::key(2), {16, 16});
  ts::Array D = ts::random::normal(ts::random::key(3), {16, 16});
  // Rows of A split over every device, B, C, D replicated: each device's rows
  // of the product need nothing from the others. No collective at all.
  auto chain = ts::shard_map(
      [](ts::Array a, ts::Array b, ts::Array c, ts::Array d) {
        return ts::matmul(ts::matmul(ts::matmul(a, b), c), d);
      },
      mesh2, {P({"x", "y"}, ts::None), P(), P(), P()}, P({"x", "y"}, ts::None));
  auto rows = ts::NamedSharding(mesh2, P({"x", "y"}, ts::None));
  ts::Array A_rows = ts::with_sharding_constraint(A, rows);
  ts::Array ABCD = chain(A_rows, B_replicated, ts::with_sharding_constraint(C, fully_replicated),
                         ts::with_sharding_constraint(D, fully_replicated));
  ts::Array want = ts::matmul(ts::matmul(ts::matmul(A, B), C), D);
  ok = agree("A @ B @ C @ D", ABCD,
             ts::matmul(ts::matmul(ts::matmul(A_rows, B_replicated), C), D).block_until_ready()) && ok;
  auto chain_compiled = ts::jit(chain).lower(A_rows, B_replicated, C, D).compile();
  std::cout << "allclose to the unsharded product: " << (max_abs_diff(ABCD, want) < 1e-3 ? "True" : "False")
            << "; collectives in the compiled program: " << collectives(chain_compiled.as_text()) << "\n";
  ok = ok && collectives(chain_compiled.as_text()) == 0 && max_abs_diff(ABCD, want) < 1e-3;
  std::cout << "\n" << (ok ? "all checks passed" : "SOME CHECKS FAILED") << "\n";
  return ok ? 0 : 1;
}
