// Output shardings and collectives of jitted programs against what JAX 0.11
// chose for the same programs (tests/data/jax/propagation.json).
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <set>

#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::jax_fact;
using ts::testing::parse_spec;

namespace {

using Fn = std::function<ts::Array(const std::vector<ts::Array>&)>;

std::map<std::string, Fn> programs() {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  std::map<std::string, Fn> m;
  m["sin"] = [](auto& v) { return ts::sin(v[0]); };
  m["2sin+1"] = [](auto& v) { return 2 * ts::sin(v[0]) + 1; };
  m["copy"] = [](auto& v) { return ts::copy(v[0]); };
  for (auto n : {"dot_row_col", "dot_block_row", "dot_col_row", "dot_row_row", "dot_rep_col", "dot_row_rep",
                 "dot_colb_rowb", "dot_ab_ba"})
    m[n] = [](auto& v) { return ts::dot(v[0], v[1]); };
  for (auto n : {"add_row_col", "add_ab_ba", "add_row_rep", "add_bcast_row", "add_bcast_sharded"})
    m[n] = [](auto& v) { return v[0] + v[1]; };
  m["sum0"] = [](auto& v) { return ts::sum(v[0], 0); };
  m["sum1"] = [](auto& v) { return ts::sum(v[0], 1); };
  m["sum_all"] = [](auto& v) { return ts::sum(v[0]); };
  m["max0"] = [](auto& v) { return ts::max(v[0], 0); };
  m["mean_rows"] = [](auto& v) { return ts::mean(v[0], 1); };
  m["transpose"] = [](auto& v) { return v[0].T(); };
  m["reshape_flat"] = [](auto& v) { return v[0].reshape({256}); };
  m["reshape_split"] = [](auto& v) { return v[0].reshape({4, 4, 16}); };
  m["reshape_merge_b"] = [](auto& v) { return v[0].reshape({256}); };
  m["slice_rows"] = [](auto& v) { return v[0].index({ts::slice(std::nullopt, 8)}); };
  m["expand"] = [](auto& v) { return v[0].index({ts::newaxis}); };
  m["concat0"] = [](auto& v) { return ts::concatenate({v[0], v[1]}, 0); };
  m["softmax_rows"] = [](auto& v) { return ts::nn::softmax(v[0], -1); };
  m["wsc_ba"] = [mesh](auto& v) { return ts::with_sharding_constraint(v[0] + 1, ts::NamedSharding(mesh, P("b", "a"))); };
  m["wsc_rep"] = [mesh](auto& v) { return ts::with_sharding_constraint(v[0] + 1, ts::NamedSharding(mesh, P())); };
  m["relu_layer"] = [](auto& v) { return ts::maximum(ts::dot(v[0], v[1]) + v[2], 0.0); };
  m["mlp2"] = [](auto& v) { return ts::dot(ts::maximum(ts::dot(v[0], v[1]), 0.0), v[2]); };
  m["f_contract"] = [](auto& v) { return ts::sum(v[0], 0); };
  m["layer_seed"] = [](auto& v) { return ts::nn::sigmoid(ts::matmul(v[0], v[1]) + v[2]); };
  return m;
}

// Where tessel deliberately differs from JAX: JAX keeps sliced and
// concatenated dims split (with a collective-permute or all-to-all), tessel
// replicates dims whose extent an op changes; a reshard across two dims is an
// all-gather + slice here. Results are the same; the layouts differ.
const std::set<std::string> kDiffers = {"slice_rows", "concat0", "wsc_ba"};

std::set<std::string> collectives_in(const std::string& text) {
  std::set<std::string> found;
  for (std::string c : {"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"})
    if (text.find(c + "(") != std::string::npos) found.insert(c);
  return found;
}

}  // namespace

TEST_CASE("output shardings and collectives match JAX on the seed cases") {
  auto facts = jax_fact("propagation.json");
  auto progs = programs();
  int compared = 0;
  for (auto& f : facts) {
    std::string name = f["name"];
    CAPTURE(name);
    REQUIRE(progs.count(name));
    ts::Mesh mesh = name == "f_contract" ? ts::make_mesh({2, 4}, {"x", "y"})
                    : name == "layer_seed" ? ts::Mesh(ts::devices(), "x")
                                           : ts::make_mesh({4, 2}, {"a", "b"});
    std::vector<ts::Array> args;
    for (size_t i = 0; i < f["shapes"].size(); ++i) {
      ts::Shape s = f["shapes"][i].get<ts::Shape>();
      std::vector<float> v(ts::numel(s));
      for (size_t k = 0; k < v.size(); ++k) v[k] = float(k) / 100.0f;
      args.push_back(ts::device_put(ts::array(v, s), ts::NamedSharding(mesh, parse_spec(f["in_specs"][i]))));
    }
    auto fn = progs.at(name);
    ts::JitOptions opt;
    opt.name = name;
    auto jitted = ts::jit([fn](const std::vector<ts::Array>& v) { return fn(v); }, opt);
    ts::Array out = jitted(args);
    std::string text = jitted.lower(args).compile().as_text();
    std::string want_spec = f["out_specs"][0];
    std::set<std::string> want_coll;
    for (auto& c : f["collectives"]) want_coll.insert(c.get<std::string>());
    std::string got_spec = out.sharding().as_named().spec().str();
    // The values: against the eager, unsharded computation.
    std::vector<ts::Array> plain;
    for (auto& a : args) plain.push_back(ts::device_put(a, ts::Device(0)));
    auto ref = fn(plain).to_vector<float>();
    auto got = out.to_vector<float>();
    REQUIRE(ref.size() == got.size());
    for (size_t k = 0; k < ref.size(); ++k) REQUIRE(std::fabs(ref[k] - got[k]) <= 1e-4f + 1e-5f * std::fabs(ref[k]));
    if (kDiffers.count(name)) continue;
    CHECK(got_spec == want_spec);
    CHECK(collectives_in(text) == want_coll);
    ++compared;
  }
  CHECK(compared == int(facts.size() - kDiffers.size()));
}

TEST_CASE("the reference's facts: sin keeps P('a','b'); row x col dot needs no collective; block x row all-reduces") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto y = ts::device_put(ts::arange(256.0).reshape({16, 16}), ts::NamedSharding(mesh, P("a", "b")));
  CHECK(ts::sin(y).sharding() == y.sharding());
  auto r = ts::device_put(y, ts::NamedSharding(mesh, P("a", ts::None)));
  auto c = ts::device_put(y, ts::NamedSharding(mesh, P(ts::None, "b")));
  auto dot = ts::jit([](ts::Array a, ts::Array b) { return ts::dot(a, b); });
  CHECK(dot(r, c).sharding().as_named().spec() == P("a", "b"));
  CHECK(collectives_in(dot.lower(r, c).compile().as_text()).empty());
  auto b = ts::device_put(y, ts::NamedSharding(mesh, P("b", ts::None)));
  CHECK(dot(y, b).sharding().as_named().spec() == P("a", ts::None));
  CHECK(collectives_in(dot.lower(y, b).compile().as_text()) == std::set<std::string>{"all-reduce"});
}
