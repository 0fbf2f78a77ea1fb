// visualize_sharding after jax/_src/debugging.py: the same cell sizes
// (base height 10 rows, 2.5 columns per row, min width 9, max width 80) and
// rich's table layout (square box, a line between rows, no edge padding).
// Uneven shardings are drawn too; their cells follow the true shard sizes.
#include <tessel/debug.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "dsl/src/sharding_impl.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::debug {

namespace {

struct Cell {
  std::string entry;
  int width = 0, height = 1;
  int top = 0, right = 0, bottom = 0, left = 0;
  std::string bg;  // "#rrggbb" in colour mode
};

struct Grid {
  int rows = 0, cols = 0;
  std::map<std::pair<int, int>, std::set<int>> devices;
  std::map<std::pair<int, int>, double> width_frac;
  std::map<std::pair<int, int>, std::optional<double>> height_frac;
};

Grid chunk_grid(const Shape& shape, const Sharding& sharding) {
  if (shape.empty() || shape.size() > 2)
    throw ShapeError("visualize_sharding only works for shapes with 1 and 2 dimensions, got shape " +
                     shape_str(shape));
  AxisSharding a = tessel::detail::axis_sharding(sharding, shape);
  Grid g;
  for (std::int64_t p = 0; p < a.mesh->size(); ++p) {
    auto t = a.tile_index(p);
    Box b = a.shard_box(shape, p);
    std::pair<int, int> key;
    if (shape.size() == 2) {
      key = {int(t[0]), int(t[1])};
      g.height_frac[key] = double(b.stop[0] - b.start[0]) / double(std::max<std::int64_t>(shape[0], 1));
      g.width_frac[key] = double(b.stop[1] - b.start[1]) / double(std::max<std::int64_t>(shape[1], 1));
    } else {
      key = {0, int(t[0])};
      g.height_frac[key] = std::nullopt;
      g.width_frac[key] = double(b.stop[0] - b.start[0]) / double(std::max<std::int64_t>(shape[0], 1));
    }
    g.devices[key].insert(a.mesh->device_ids()[p]);
    g.rows = std::max(g.rows, key.first + 1);
    g.cols = std::max(g.cols, key.second + 1);
  }
  return g;
}

// matplotlib's tab20b, the colour map JAX uses.
const char* kTab20b[20] = {"#393B79", "#5254A3", "#6B6ECF", "#9C9EDE", "#637939", "#8CA252", "#B5CF6B",
                           "#CEDB9C", "#8C6D31", "#BD9E39", "#E7BA52", "#E7CB94", "#843C39", "#AD494A",
                           "#D6616B", "#E7969C", "#7B4173", "#A55194", "#CE6DBD", "#DE9ED6"};

// JAX's make_color_iter: colours spread over the map, stepping by half.
std::vector<std::string> color_sequence(int rows, int cols) {
  int n = rows * cols;
  std::vector<std::string> out;
  int idx = 0;
  for (int k = 0; k < n; ++k) {
    double v = n == 1 ? 0.0 : double(idx) / double(n - 1);
    int c = std::min(19, int(v * 20));
    out.push_back(kTab20b[c]);
    idx = (idx + n / 2 + (n % 2 == 0 ? 1 : 0)) % n;
  }
  return out;
}

void rgb(const std::string& hex, int& r, int& g, int& b) {
  r = std::stoi(hex.substr(1, 2), nullptr, 16);
  g = std::stoi(hex.substr(3, 2), nullptr, 16);
  b = std::stoi(hex.substr(5, 2), nullptr, 16);
}

std::string text_color(const std::string& bg) {
  int r, g, b;
  rgb(bg, r, g, b);
  return (r * 0.299 + g * 0.587 + b * 0.114) > 186 ? "#000000" : "#ffffff";
}

// rich's ratio_reduce.
std::vector<int> ratio_reduce(int total, const std::vector<int>& ratios_in, const std::vector<int>& maximums,
                              const std::vector<int>& values) {
  std::vector<int> ratios(ratios_in.size());
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i] = maximums[i] ? ratios_in[i] : 0;
  int total_ratio = 0;
  for (int r : ratios) total_ratio += r;
  if (!total_ratio) return values;
  int total_remaining = total;
  std::vector<int> result;
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (ratios[i] && total_ratio > 0) {
      // Python's round(): halves to even, as nearbyint in the default mode.
      int distributed = std::min(maximums[i], int(std::nearbyint(double(ratios[i]) * total_remaining / total_ratio)));
      result.push_back(values[i] - distributed);
      total_remaining -= distributed;
      total_ratio -= ratios[i];
    } else {
      result.push_back(values[i]);
    }
  }
  return result;
}

// rich's Table._collapse_widths followed by the even reduction of last resort.
std::vector<int> fit_widths(std::vector<int> widths, int max_width) {
  int total = 0;
  for (int w : widths) total += w;
  int excess = total - max_width;
  while (total && excess > 0) {
    int max_col = *std::max_element(widths.begin(), widths.end());
    int second = 0;
    for (int w : widths)
      if (w != max_col) second = std::max(second, w);
    int diff = max_col - second;
    std::vector<int> ratios;
    for (int w : widths) ratios.push_back(w == max_col ? 1 : 0);
    if (!diff) break;
    widths = ratio_reduce(excess, ratios, std::vector<int>(widths.size(), std::min(excess, diff)), widths);
    total = 0;
    for (int w : widths) total += w;
    excess = total - max_width;
  }
  if (total > max_width) widths = ratio_reduce(total - max_width, std::vector<int>(widths.size(), 1), widths, widths);
  return widths;
}

// Words of `entry` wrapped to `width` columns, each line centred.
std::vector<std::string> centered_lines(const std::string& entry, int width) {
  std::vector<std::string> lines;
  if (int(entry.size()) <= width) {
    lines.push_back(entry);
  } else {
    std::istringstream is(entry);
    std::string word, line;
    while (is >> word) {
      while (int(word.size()) > width && width > 0) {
        if (!line.empty()) lines.push_back(line), line.clear();
        lines.push_back(word.substr(0, width));
        word = word.substr(width);
      }
      if (line.empty()) line = word;
      else if (int(line.size() + 1 + word.size()) <= width) line += " " + word;
      else lines.push_back(line), line = word;
    }
    if (!line.empty()) lines.push_back(line);
  }
  for (auto& l : lines) {
    int excess = std::max(0, width - int(l.size()));
    l = std::string(excess / 2, ' ') + l + std::string(excess - excess / 2, ' ');
  }
  return lines;
}

std::string render(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts, bool use_color) {
  Grid g = chunk_grid(shape, sharding);
  const int base_height = int(10 * opts.scale);
  const double aspect = double(shape.size() == 2 ? shape[1] : 1) / double(std::max<std::int64_t>(shape[0], 1));
  const int base_width = int(base_height * aspect);
  const double height_to_width = 2.5;
  auto colors = color_sequence(g.rows, g.cols);
  size_t next_color = 0;

  std::vector<std::vector<Cell>> cells(g.rows, std::vector<Cell>(g.cols));
  for (int i = 0; i < g.rows; ++i)
    for (int j = 0; j < g.cols; ++j) {
      Cell& c = cells[i][j];
      std::ostringstream e;
      e << "CPU ";
      bool first = true;
      for (int id : g.devices[{i, j}]) e << (first ? "" : ",") << id, first = false;
      c.entry = e.str();
      int width = int(g.width_frac[{i, j}] * base_width * height_to_width);
      auto hf = g.height_frac[{i, j}];
      int height = hf ? int(*hf * base_height) : 1;
      width = std::min(std::max(width, opts.min_width), opts.max_width);
      auto divmod = [](int a, int b, int& q, int& r) {
        q = int(std::floor(double(a) / b));
        r = a - q * b;
      };
      int rem;
      divmod(width - int(c.entry.size()) - 2, 2, c.left, rem);
      c.right = c.left + rem;
      divmod(height - 2, 2, c.top, rem);
      c.bottom = c.top + rem;
      if (use_color) {
        c.bg = colors[next_color++];
        c.top += 1, c.bottom += 1, c.left += 1, c.right += 1;
      }
      c.top = std::max(c.top, 0), c.right = std::max(c.right, 0);
      c.bottom = std::max(c.bottom, 0), c.left = std::max(c.left, 0);
    }

  // Column widths as rich measures the cells, shrunk to fit the console.
  // rich measures each cell against the width left after the borders, so
  // no column starts wider than that.
  const int borders = use_color ? 0 : g.cols + 1;
  const int available = opts.max_width - borders;
  std::vector<int> colw(g.cols, 0);
  for (int j = 0; j < g.cols; ++j)
    for (int i = 0; i < g.rows; ++i)
      colw[j] = std::max(colw[j], std::min(available, cells[i][j].left + int(cells[i][j].entry.size()) + cells[i][j].right));
  int total = 0;
  for (int w : colw) total += w;
  if (total > available) colw = fit_widths(colw, available);

  auto paint = [&](const std::string& text, const Cell& c) {
    if (!use_color) return text;
    int r, gg, b, tr, tg, tb;
    rgb(c.bg, r, gg, b);
    rgb(text_color(c.bg), tr, tg, tb);
    char buf[64];
    std::snprintf(buf, sizeof buf, "\x1b[38;2;%d;%d;%d;48;2;%d;%d;%dm", tr, tg, tb, r, gg, b);
    return std::string(buf) + text + "\x1b[0m";
  };

  std::ostringstream os;
  auto hline = [&](const char* l, const char* m, const char* r) {
    os << l;
    for (int j = 0; j < g.cols; ++j) {
      for (int k = 0; k < colw[j]; ++k) os << "─";
      os << (j + 1 < g.cols ? m : r);
    }
    os << '\n';
  };
  if (!use_color) hline("┌", "┬", "┐");
  for (int i = 0; i < g.rows; ++i) {
    // As rich renders a Padding(Align(entry)) cell: the padding keeps its
    // natural width (at most the column's); text wraps into what is left
    // between the paddings, and nothing shows when nothing is left; a row is
    // at least one line; short cells are filled to the column on the right.
    std::vector<std::vector<std::string>> lines(g.cols);
    size_t row_height = 1;
    for (int j = 0; j < g.cols; ++j) {
      const Cell& c = cells[i][j];
      const int width = std::min(c.left + int(c.entry.size()) + c.right, colw[j]);
      const int inner = width - c.left - c.right;
      std::string blank(width, ' ');
      for (int k = 0; k < c.top; ++k) lines[j].push_back(blank);
      if (inner > 0)
        for (auto& l : centered_lines(c.entry, inner))
          lines[j].push_back(std::string(c.left, ' ') + l + std::string(c.right, ' '));
      for (int k = 0; k < c.bottom; ++k) lines[j].push_back(blank);
      for (auto& l : lines[j]) l.resize(colw[j], ' ');
      row_height = std::max(row_height, lines[j].size());
    }
    for (size_t k = 0; k < row_height; ++k) {
      if (!use_color) os << "│";
      for (int j = 0; j < g.cols; ++j) {
        std::string text = k < lines[j].size() ? lines[j][k] : std::string(colw[j], ' ');
        os << paint(text, cells[i][j]);
        if (!use_color) os << "│";
      }
      os << '\n';
    }
    if (!use_color && i + 1 < g.rows) hline("├", "┼", "┤");
  }
  if (!use_color) hline("└", "┴", "┘");
  return os.str();
}

bool stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) && !(term && std::string(term) == "dumb");
}

}  // namespace

std::string sharding_text(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts) {
  check_shape(shape, DType::float32, "sharding_text");
  return render(shape, sharding, opts, opts.use_color.value_or(false));
}

void visualize_sharding(const Shape& shape, const Sharding& sharding, std::ostream& os,
                        const VisualizeOptions& opts) {
  os << render(shape, sharding, opts, opts.use_color.value_or(false));
}

void visualize_sharding(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts) {
  std::cout << render(shape, sharding, opts, opts.use_color.value_or(stdout_is_terminal()));
  std::cout.flush();
}

void visualize_array_sharding(const Array& x, const VisualizeOptions& opts) {
  visualize_sharding(x.shape(), x.sharding(), opts);
}

void visualize_array_sharding(const Array& x, std::ostream& os, const VisualizeOptions& opts) {
  visualize_sharding(x.shape(), x.sharding(), os, opts);
}

std::string sharding_svg_text(const Shape& shape, const Sharding& sharding) {
  Grid g = chunk_grid(shape, sharding);
  // 480 px for the long side of the array, proportions as the array's.
  const double rows = double(shape[0]), cols = shape.size() == 2 ? double(shape[1]) : 1.0;
  double W = 480, H = 480;
  if (shape.size() == 1) H = 60;
  else if (cols >= rows) H = std::max(60.0, 480 * rows / std::max(cols, 1.0));
  else W = std::max(60.0, 480 * cols / std::max(rows, 1.0));
  auto colors = color_sequence(g.rows, g.cols);
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 2 << "\" height=\"" << H + 2
     << "\" font-family=\"monospace\" font-size=\"13\">\n";
  double y = 1;
  size_t next = 0;
  for (int i = 0; i < g.rows; ++i) {
    double x = 1;
    double h = g.height_frac[{i, 0}] ? *g.height_frac[{i, 0}] * H : H;
    for (int j = 0; j < g.cols; ++j) {
      double w = g.width_frac[{i, j}] * W;
      const std::string& bg = colors[next++];
      std::ostringstream label;
      label << "CPU ";
      bool first = true;
      for (int id : g.devices[{i, j}]) label << (first ? "" : ",") << id, first = false;
      os << "  <rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << h << "\" fill=\"" << bg
         << "\" stroke=\"#000000\"/>\n";
      os << "  <text x=\"" << x + w / 2 << "\" y=\"" << y + h / 2
         << "\" text-anchor=\"middle\" dominant-baseline=\"middle\" fill=\"" << text_color(bg) << "\">"
         << label.str() << "</text>\n";
      x += w;
    }
    y += h;
  }
  os << "</svg>\n";
  return os.str();
}

void sharding_svg(const Array& x, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw Error("sharding_svg: cannot write " + path);
  f << sharding_svg_text(x.shape(), x.sharding());
}

}  // namespace tessel::debug
