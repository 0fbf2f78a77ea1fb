#include <doctest/doctest.h>

#include "tests/common/golden.hpp"

namespace ts = tessel;

namespace demo {
struct Layer {
  BOOST_HANA_DEFINE_STRUCT(Layer, (ts::Array, w), (ts::Array, b), (float, scale));
};
struct Plain {
  ts::Array x;
  std::vector<ts::Array> ys;
};
}  // namespace demo
BOOST_HANA_ADAPT_STRUCT(demo::Plain, x, ys);

namespace {
using Tree = std::tuple<std::vector<std::pair<ts::Array, ts::Array>>, std::map<std::string, ts::Array>,
                        std::array<ts::Array, 2>, demo::Layer>;
Tree sample() {
  return Tree{{{ts::array(1.0f), ts::array(2.0f)}, {ts::array(3.0f), ts::array(4.0f)}},
              {{"z", ts::array(6.0f)}, {"a", ts::array(5.0f)}},
              {ts::array(7.0f), ts::array(8.0f)},
              demo::Layer{ts::array(9.0f), ts::array(10.0f), 0.5f}};
}
std::vector<float> values(const std::vector<ts::Array>& leaves) {
  std::vector<float> v;
  for (auto& l : leaves) v.push_back(l.item<float>());
  return v;
}
}  // namespace

TEST_CASE("flatten visits leaves in order; maps in key order as JAX sorts dict keys") {
  Tree t = sample();
  auto leaves = ts::tree::flatten(t);
  REQUIRE(leaves.size() == 11);
  CHECK(values(leaves) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0.5f});
  CHECK(ts::tree::leaf_count(t) == 11);
  // The scalar leaf becomes a weakly typed 0-d array... of its own type: float is strong.
  CHECK_FALSE(leaves[10].weak_type());
  CHECK(ts::tree::flatten(std::pair<double, int>{1.5, 2})[0].weak_type());
}

TEST_CASE("structure names the shape of the tree") {
  CHECK(ts::tree::structure(sample()) == "([(*, *), (*, *)], {'a': *, 'z': *}, [*, *], struct(w=*, b=*, scale=*))");
  demo::Plain p{ts::array(1.0f), {ts::array(2.0f), ts::array(3.0f)}};
  CHECK(ts::tree::structure(p) == "struct(x=*, ys=[*, *])");
}

TEST_CASE("unflatten rebuilds the same type from new leaves") {
  Tree t = sample();
  std::vector<ts::Array> fresh;
  for (int i = 0; i < 11; ++i) fresh.push_back(ts::array(float(100 + i)));
  Tree u = ts::tree::unflatten(t, fresh);
  CHECK(std::get<0>(u)[1].second.item<float>() == 103);
  CHECK(std::get<1>(u).at("a").item<float>() == 104);
  CHECK(std::get<3>(u).scale == 110.0f);
  CHECK(values(ts::tree::flatten(u)) == values(fresh));
  fresh.pop_back();
  CHECK_THROWS_AS(ts::tree::unflatten(t, fresh), ts::TypeError);
}

TEST_CASE("map applies a function to every leaf") {
  demo::Plain p{ts::array(1.0f), {ts::array(2.0f), ts::array(3.0f)}};
  auto q = ts::tree::map([](const ts::Array& a) { return ts::array(a.item<float>() * 10); }, p);
  CHECK(q.x.item<float>() == 10);
  CHECK(q.ys[1].item<float>() == 30);
  CHECK(p.ys[1].item<float>() == 3);
}
