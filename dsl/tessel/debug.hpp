// ts::debug: pictures of shardings (API.md "visualize_array_sharding").
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <tessel/array.hpp>
#include <tessel/sharding.hpp>

namespace tessel::debug {

struct VisualizeOptions {
  // Background colour per device set; default: when the stream is a terminal.
  std::optional<bool> use_color;
  int max_width = 80;
  int min_width = 9;
  double scale = 1.0;
};

// JAX's box drawing of where each part of a 1-D or 2-D array lives.
void visualize_array_sharding(const Array& x, const VisualizeOptions& opts = {});
void visualize_array_sharding(const Array& x, std::ostream& os, const VisualizeOptions& opts = {});
void visualize_sharding(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts = {});
void visualize_sharding(const Shape& shape, const Sharding& sharding, std::ostream& os,
                        const VisualizeOptions& opts = {});
// The drawing as text (no colour unless asked for).
std::string sharding_text(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts = {});

// An SVG picture of the same layout, for documents.
std::string sharding_svg_text(const Shape& shape, const Sharding& sharding);
void sharding_svg(const Array& x, const std::string& path);

}  // namespace tessel::debug
