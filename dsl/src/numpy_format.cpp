#include "dsl/src/numpy_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "tessel/core/errors.hpp"

namespace tessel::detail {

namespace {

bool summarize(const Shape& shape, const Array2StringOptions& opt) { return numel(shape) > opt.threshold; }

// Indices shown along one axis of length n.
std::vector<std::int64_t> axis_shown(std::int64_t n, bool summary, int edge) {
  std::vector<std::int64_t> r;
  if (summary && 2 * edge < n) {
    for (int i = 0; i < edge; ++i) r.push_back(i);
    for (int i = edge; i > 0; --i) r.push_back(n - i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) r.push_back(i);
  }
  return r;
}

void extend_line(std::string& s, std::string& line, const std::string& word, int line_width,
                 const std::string& next_line_prefix) {
  bool needs_wrap = int(line.size() + word.size()) > line_width;
  if (int(line.size()) <= int(next_line_prefix.size())) needs_wrap = false;
  if (needs_wrap) {
    auto end = line.find_last_not_of(' ');
    s += (end == std::string::npos ? std::string() : line.substr(0, end + 1)) + "\n";
    line = next_line_prefix;
  }
  line += word;
}

std::string rstrip(const std::string& s) {
  auto end = s.find_last_not_of(" \t\n");
  return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

struct Layout {
  const Shape& shape;
  const Array2StringOptions& opt;
  bool summary;
  std::map<std::int64_t, const std::string*> word_at;  // flat index -> word
  std::vector<std::int64_t> strides;

  std::string recurse(std::vector<std::int64_t>& index, const std::string& hanging_indent, int curr_width) {
    const int axis = int(index.size());
    const int axes_left = int(shape.size()) - axis;
    if (axes_left == 0) {
      std::int64_t flat = 0;
      for (int k = 0; k < axis; ++k) flat += index[k] * strides[k];
      return *word_at.at(flat);
    }
    const std::string next_hanging_indent = hanging_indent + " ";
    const int next_width = curr_width - 1;  // len(']')
    const std::int64_t a_len = shape[axis];
    const bool show_summary = summary && 2 * opt.edgeitems < a_len;
    const std::int64_t leading = show_summary ? opt.edgeitems : 0;
    const std::int64_t trailing = show_summary ? opt.edgeitems : a_len;
    const std::string sep_stripped = rstrip(opt.separator);
    std::string s;
    auto child = [&](std::int64_t i) {
      index.push_back(i);
      std::string r = recurse(index, next_hanging_indent, next_width);
      index.pop_back();
      return r;
    };
    if (axes_left == 1) {
      const int elem_width = curr_width - int(std::max<size_t>(sep_stripped.size(), 1));
      std::string line = hanging_indent;
      for (std::int64_t i = 0; i < leading; ++i) {
        extend_line(s, line, child(i), elem_width, hanging_indent);
        line += opt.separator;
      }
      if (show_summary) {
        extend_line(s, line, "...", elem_width, hanging_indent);
        line += opt.separator;
      }
      for (std::int64_t i = trailing; i > 1; --i) {
        extend_line(s, line, child(a_len - i), elem_width, hanging_indent);
        line += opt.separator;
      }
      extend_line(s, line, child(a_len - 1), elem_width, hanging_indent);
      s += line;
    } else {
      const std::string line_sep = sep_stripped + std::string(axes_left - 1, '\n');
      for (std::int64_t i = 0; i < leading; ++i) s += hanging_indent + child(i) + line_sep;
      if (show_summary) s += hanging_indent + "..." + line_sep;
      for (std::int64_t i = trailing; i > 1; --i) s += hanging_indent + child(a_len - i) + line_sep;
      s += hanging_indent + child(a_len - 1);
    }
    std::string r(1, '[');
    r.append(s, hanging_indent.size());
    r += ']';
    return r;
  }
};

// Shortest round-trip text of x in fixed or scientific notation, with at most
// `precision` digits after the point (numpy's dragon4 'unique' with a cutoff).
template <class T>
std::string dragon4(T x, bool scientific, int precision) {
  char buf[512];
  auto fmt = scientific ? std::chars_format::scientific : std::chars_format::fixed;
  auto r = std::to_chars(buf, buf + sizeof buf, x, fmt);
  std::string s(buf, r.ptr);
  std::string mant = s, exp;
  if (scientific) {
    auto e = s.find('e');
    mant = s.substr(0, e);
    exp = s.substr(e);
  }
  auto dot = mant.find('.');
  int frac = dot == std::string::npos ? 0 : int(mant.size() - dot - 1);
  if (frac > precision) {
    r = std::to_chars(buf, buf + sizeof buf, x, fmt, precision);
    s.assign(buf, r.ptr);
    mant = s;
    exp.clear();
    if (scientific) {
      auto e = s.find('e');
      mant = s.substr(0, e);
      exp = s.substr(e);
    }
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
    }
  }
  if (mant.find('.') == std::string::npos) mant += '.';
  return mant + exp;
}

// float16's own digits (F16 below): the shortest that round-trip in float16.
std::string dragon4_f16(float x, bool scientific) {
  const std::string sign = std::signbit(x) ? "-" : "";
  if (x == 0) return sign + (scientific ? "0.e+00" : "0.");
  const ShortestDecimal d = float16_shortest(float16_t(x).bits);
  const std::string digits = std::to_string(d.digits);
  const int n = int(digits.size());
  if (scientific) {
    const int e = d.exponent + n - 1;
    char ex[8];
    std::snprintf(ex, sizeof ex, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    return sign + digits.substr(0, 1) + "." + digits.substr(1) + ex;
  }
  if (d.exponent >= 0) {
    // Digits ending at or above the units: the exact integer (NumPy's min_digits=0).
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", double(std::fabs(x)));
    return sign + buf + ".";
  }
  const int frac = -d.exponent;
  return sign + (n > frac ? digits.substr(0, std::size_t(n - frac)) + "." + digits.substr(std::size_t(n - frac))
                          : "0." + std::string(std::size_t(frac - n), '0') + digits);
}

// F16: float16 values held as floats, with float16's digits and its own
// ratio test (NumPy divides the half values in half precision).
template <class T, bool F16 = false>
std::vector<std::string> format_floats_t(const std::vector<double>& in, bool plus) {
  auto dragon = [](T v, bool sci, int precision) {
    if constexpr (F16) return dragon4_f16(v, sci);
    else return dragon4(v, sci, precision);
  };
  // plus: numpy's sign='+' (a complex number's imaginary parts)
  auto sgn = [plus](T v, std::string s) { return plus && !std::signbit(v) ? "+" + s : s; };
  std::vector<T> vals(in.begin(), in.end());
  std::vector<T> finite;
  for (T v : vals)
    if (std::isfinite(v)) finite.push_back(v);
  bool exp_format = false;
  {
    T max_val = 0, min_val = 0;
    bool any = false;
    for (T v : finite) {
      T a = std::fabs(v);
      if (a == 0) continue;
      if (!any) {
        max_val = min_val = a;
        any = true;
      } else {
        max_val = std::max(max_val, a);
        min_val = std::min(min_val, a);
      }
    }
    bool ratio_big;
    if constexpr (F16) ratio_big = float(max_val) / float(min_val) > 1000.25f;  // the half quotient > 1000
    else ratio_big = double(max_val) / double(min_val) > 1000.;
    if (any && (max_val >= T(1e8) || min_val < T(0.0001) || ratio_big)) exp_format = true;
  }
  const int precision = 8;
  int pad_left = 0, pad_right = 0, exp_size = -1, sci_precision = 0;
  if (finite.empty()) {
    pad_left = pad_right = 0;
  } else if (exp_format) {
    for (T v : finite) {
      std::string s = sgn(v, dragon(v, true, precision));
      auto e = s.find('e');
      std::string mant = s.substr(0, e), ex = s.substr(e + 1);
      auto dot = mant.find('.');
      pad_left = std::max(pad_left, int(dot));
      sci_precision = std::max(sci_precision, int(mant.size() - dot - 1));
      exp_size = std::max(exp_size, int(ex.size()) - 1);
    }
    pad_right = exp_size + 2 + sci_precision;
  } else {
    for (T v : finite) {
      std::string s = sgn(v, dragon(v, false, precision));
      auto dot = s.find('.');
      pad_left = std::max(pad_left, int(dot));
      pad_right = std::max(pad_right, int(s.size() - dot - 1));
    }
  }
  if (finite.size() != vals.size()) {
    bool neg_inf = plus;
    for (T v : vals)
      if (std::isinf(v) && v < 0) neg_inf = true;
    int offset = pad_right + 1;
    pad_left = std::max({pad_left, 3 - offset, 3 + int(neg_inf) - offset});
  }
  std::vector<std::string> out;
  out.reserve(vals.size());
  for (T v : vals) {
    std::string w;
    if (!std::isfinite(v)) {
      std::string r = std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
      if (plus && r[0] != '-') r = "+" + r;
      int width = pad_left + pad_right + 1;
      w = std::string(std::max(0, width - int(r.size())), ' ') + r;
    } else if (exp_format) {
      // Every value gets sci_precision digits; past its shortest digits they
      // are the exact value's, rounded (dragon4's min_digits), not zeros.
      char buf[128];
      auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, sci_precision);
      std::string s = sgn(v, std::string(buf, r.ptr));
      if constexpr (F16) {
        // Shortest digits that already fill the precision stay as they are.
        std::string shortest = sgn(v, dragon(v, true, precision));
        auto e0 = shortest.find('e'), d0 = shortest.find('.');
        if (int(e0 - d0 - 1) == sci_precision) s = shortest;
      }
      auto e = s.find('e');
      std::string mant = s.substr(0, e), ex = s.substr(e + 1);
      auto dot = mant.find('.');
      std::string ip = mant.substr(0, dot), fp = dot == std::string::npos ? "" : mant.substr(dot + 1);
      char sign = ex[0];
      std::string digits = ex.substr(1);
      if (int(digits.size()) < exp_size) digits.insert(0, std::size_t(exp_size) - digits.size(), '0');
      w = std::string(std::max(0, pad_left - int(ip.size())), ' ') + ip + "." + fp + "e" + sign + digits;
    } else {
      std::string s = sgn(v, dragon(v, false, precision));
      auto dot = s.find('.');
      std::string ip = s.substr(0, dot), fp = s.substr(dot + 1);
      w = std::string(std::max(0, pad_left - int(ip.size())), ' ') + ip + "." + fp +
          std::string(std::max(0, pad_right - int(fp.size())), ' ');
    }
    out.push_back(std::move(w));
  }
  return out;
}

template <class T>
std::vector<std::string> pad_right_align(const std::vector<T>& values) {
  std::vector<std::string> out;
  size_t width = 0;
  for (auto v : values) {
    out.push_back(std::to_string(v));
    width = std::max(width, out.back().size());
  }
  for (auto& s : out) s = std::string(width - s.size(), ' ') + s;
  return out;
}

}  // namespace

std::vector<std::int64_t> shown_elements(const Shape& shape, const Array2StringOptions& opt) {
  const bool summary = summarize(shape, opt);
  std::vector<std::vector<std::int64_t>> per_axis;
  for (auto n : shape) per_axis.push_back(axis_shown(n, summary, opt.edgeitems));
  auto strides = row_major_strides(shape);
  std::vector<std::int64_t> out;
  if (numel(shape) == 0) return out;
  std::vector<size_t> pos(shape.size(), 0);
  for (;;) {
    std::int64_t flat = 0;
    for (size_t k = 0; k < shape.size(); ++k) flat += per_axis[k][pos[k]] * strides[k];
    out.push_back(flat);
    int k = int(shape.size()) - 1;
    for (; k >= 0; --k) {
      if (++pos[k] < per_axis[k].size()) break;
      pos[k] = 0;
    }
    if (k < 0) break;
  }
  return out;
}

std::string layout_array(const Shape& shape, const std::vector<std::string>& words, const Array2StringOptions& opt) {
  auto shown = shown_elements(shape, opt);
  TESSEL_CHECK_INTERNAL(shown.size() == words.size());
  Layout l{shape, opt, summarize(shape, opt), {}, row_major_strides(shape)};
  for (size_t i = 0; i < shown.size(); ++i) l.word_at[shown[i]] = &words[i];
  std::vector<std::int64_t> index;
  const std::string next_line_prefix(opt.prefix.size() + 1, ' ');
  return l.recurse(index, next_line_prefix, opt.linewidth - int(opt.suffix.size()));
}

std::vector<std::string> format_float16(const std::vector<double>& values) {
  return format_floats_t<float, true>(values, false);
}

std::vector<std::string> format_floats(const std::vector<double>& values, bool single_precision) {
  return single_precision ? format_floats_t<float>(values, false) : format_floats_t<double>(values, false);
}

// numpy's ComplexFloatingFormat: the real parts formatted together, the
// imaginary parts together with an explicit sign, then 'j' before the
// imaginary part's padding.
std::vector<std::string> format_complex(const std::vector<std::complex<double>>& values, bool single_precision) {
  std::vector<double> re, im;
  for (auto z : values) re.push_back(z.real()), im.push_back(z.imag());
  auto r = single_precision ? format_floats_t<float>(re, false) : format_floats_t<double>(re, false);
  auto i = single_precision ? format_floats_t<float>(im, true) : format_floats_t<double>(im, true);
  std::vector<std::string> out;
  for (size_t k = 0; k < values.size(); ++k) {
    std::string s = i[k];
    auto end = s.find_last_not_of(' ');
    s.insert(end == std::string::npos ? 0 : end + 1, "j");
    out.push_back(r[k] + s);
  }
  return out;
}

std::vector<std::string> format_ints(const std::vector<std::int64_t>& values) { return pad_right_align(values); }
std::vector<std::string> format_uints(const std::vector<std::uint64_t>& values) { return pad_right_align(values); }

std::vector<std::string> format_bools(const std::vector<bool>& values, bool scalar) {
  std::vector<std::string> out;
  for (bool b : values) out.push_back(b ? (scalar ? "True" : " True") : "False");
  return out;
}

std::vector<std::string> format_elements(DType dtype, const void* data, const Shape& shape,
                                         const std::vector<std::int64_t>& shown) {
  return visit_dtype(dtype, [&](auto tag) -> std::vector<std::string> {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(data);
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<bool> v;
      for (auto i : shown) v.push_back(p[i]);
      return format_bools(v, shape.empty());
    } else if constexpr (std::is_floating_point_v<T>) {
      std::vector<double> v;
      for (auto i : shown) v.push_back(double(p[i]));
      return format_floats(v, std::is_same_v<T, float>);
    } else if constexpr (std::is_same_v<T, float16_t>) {
      std::vector<double> v;
      for (auto i : shown) v.push_back(double(float(p[i])));
      return format_float16(v);
    } else if constexpr (is_narrow_float_v<T>) {
      std::vector<std::string> words;  // ml_dtypes: each element's own text, unpadded
      for (auto i : shown) words.push_back(ml_dtypes_text(float(p[i])));
      return words;
    } else if constexpr (is_complex_v<T>) {
      std::vector<std::complex<double>> v;
      for (auto i : shown) v.push_back(std::complex<double>(p[i]));
      return format_complex(v, std::is_same_v<T, std::complex<float>>);
    } else if constexpr (std::is_signed_v<T>) {
      std::vector<std::int64_t> v;
      for (auto i : shown) v.push_back(std::int64_t(p[i]));
      return format_ints(v);
    } else {
      std::vector<std::uint64_t> v;
      for (auto i : shown) v.push_back(std::uint64_t(p[i]));
      return format_uints(v);
    }
  });
}

std::string array_repr(DType dtype, bool weak_type, const Shape& shape, const void* data) {
  const std::string prefix = "Array(";
  const std::string dtype_str =
      std::string("dtype=") + dtype_name(dtype) + (weak_type ? ", weak_type=True)" : ")");
  const int line_width = 75;
  std::string s;
  if (numel(shape) == 0) {
    s = std::string("[], shape=").append(shape_str(shape));
  } else {
    Array2StringOptions opt;
    opt.separator = ", ";
    opt.prefix = prefix;
    opt.suffix = ",";
    opt.linewidth = line_width;
    auto shown = shown_elements(shape, opt);
    s = layout_array(shape, format_elements(dtype, data, shape, shown), opt);
  }
  // As JAX: the dtype joins the last line unless that would pass the width.
  auto nl = s.rfind('\n');
  int last_line_len = int(s.size()) - (nl == std::string::npos ? -1 : int(nl)) + 1;
  std::string sep = " ";
  if (last_line_len + int(dtype_str.size()) + 1 > line_width) sep = std::string(prefix.size(), ' ');
  return prefix + s + "," + sep + dtype_str;
}

}  // namespace tessel::detail
