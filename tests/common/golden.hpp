// Test helpers: golden facts measured from JAX (tests/data/jax, written by
// tools/jax_facts.py) and a parser for the partition specs they name.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tessel/tessel.hpp>

namespace tessel::testing {

inline nlohmann::json jax_fact(const std::string& file) {
  std::ifstream f(std::string(TESSEL_SOURCE_DIR) + "/tests/data/jax/" + file);
  if (!f) throw std::runtime_error("missing golden file tests/data/jax/" + file);
  return nlohmann::json::parse(f);
}

// "P('a', None)", "P(('a', 'b'), None)", "P()" -> PartitionSpec.
inline PartitionSpec parse_spec(const std::string& text) {
  std::vector<PartitionSpec::Entry> entries;
  size_t i = text.find('(') + 1;
  auto skip = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
  };
  auto name = [&] {
    size_t q = text.find('\'', i + 1);
    std::string n = text.substr(i + 1, q - i - 1);
    i = q + 1;
    return n;
  };
  for (skip(); i < text.size() && text[i] != ')'; skip()) {
    if (text.compare(i, 4, "None") == 0) {
      entries.emplace_back(None);
      i += 4;
    } else if (text[i] == '\'') {
      entries.emplace_back(name());
    } else if (text[i] == '(') {
      ++i;
      std::vector<std::string> axes;
      for (skip(); text[i] != ')'; skip()) axes.push_back(name());
      ++i;
      entries.push_back(PartitionSpec::Entry::tuple(axes));
    } else {
      throw std::runtime_error("cannot parse spec " + text);
    }
  }
  return PartitionSpec::from_entries(entries);
}

// Row-major values 0, 1, 2, ... as float32 of the given shape.
inline Array iota_f32(const Shape& shape) {
  std::vector<float> v(numel(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return array(v, shape);
}

}  // namespace tessel::testing
