#include <tessel/tessel.hpp>
#include <iostream>
namespace ts = tessel;
using ts::P;
int main() {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  std::cout << mesh << "\n";
  auto x = ts::arange(32.0).to_vector<float>();
  auto arr = ts::array(x, {4, 8});
  std::cout << arr << "\n";
  auto y = ts::device_put(arr, ts::NamedSharding(mesh, P("a", "b")));
  ts::debug::visualize_array_sharding(y);
  std::cout << y << "\n";
}
