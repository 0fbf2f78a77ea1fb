#include "dsl/src/numpy_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

#include "tessel/core/errors.hpp"
#include "tessel/numpy.hpp"

namespace tessel {

namespace {
std::mutex g_print_mu;
PrintOptions g_print_options;
}  // namespace

PrintOptions get_printoptions() {
  std::lock_guard lock(g_print_mu);
  return g_print_options;
}

void set_printoptions(const PrintOptionsUpdate& u) {
  if (u.precision && *u.precision < 0)
    throw ValueError(std::string("set_printoptions: precision must be >= 0, got ").append(std::to_string(*u.precision)));
  if (u.sign && *u.sign != '-' && *u.sign != '+' && *u.sign != ' ')
    throw ValueError(std::string("set_printoptions: sign option must be one of ' ', '+', or '-', got '")
                         .append(1, *u.sign)
                         .append("'"));
  if (u.floatmode && *u.floatmode != "fixed" && *u.floatmode != "unique" && *u.floatmode != "maxprec" &&
      *u.floatmode != "maxprec_equal")
    throw ValueError(std::string("set_printoptions: floatmode option must be one of \"fixed\", \"unique\", "
                                 "\"maxprec\", \"maxprec_equal\", got \"")
                         .append(*u.floatmode)
                         .append("\""));
  std::lock_guard lock(g_print_mu);
  PrintOptions& o = g_print_options;
  if (u.precision) o.precision = *u.precision;
  if (u.threshold) o.threshold = *u.threshold;
  if (u.edgeitems) o.edgeitems = *u.edgeitems;
  if (u.linewidth) o.linewidth = *u.linewidth;
  if (u.suppress) o.suppress = *u.suppress;
  if (u.nanstr) o.nanstr = *u.nanstr;
  if (u.infstr) o.infstr = *u.infstr;
  if (u.sign) o.sign = *u.sign;
  if (u.floatmode) o.floatmode = *u.floatmode;
}

printoptions::printoptions(const PrintOptionsUpdate& update) : saved_(get_printoptions()) { set_printoptions(update); }

printoptions::~printoptions() {
  std::lock_guard lock(g_print_mu);
  g_print_options = saved_;
}

}  // namespace tessel

namespace tessel::detail {

Array2StringOptions current_array2string_options() {
  const PrintOptions o = get_printoptions();
  Array2StringOptions a;
  a.floats = {o.precision, o.floatmode, o.suppress, o.sign, o.nanstr, o.infstr};
  a.linewidth = o.linewidth;
  a.edgeitems = o.edgeitems;
  a.threshold = o.threshold;
  return a;
}

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

// x by std::to_chars: shortest round-trip digits, or `precision` digits of
// the exact value (correctly rounded).
template <class T>
std::string chars(T x, bool scientific, std::optional<int> precision) {
  std::vector<char> buf(std::size_t(precision.value_or(0)) + 512);
  auto fmt = scientific ? std::chars_format::scientific : std::chars_format::fixed;
  auto r = precision ? std::to_chars(buf.data(), buf.data() + buf.size(), x, fmt, *precision)
                     : std::to_chars(buf.data(), buf.data() + buf.size(), x, fmt);
  TESSEL_CHECK_INTERNAL(r.ec == std::errc());
  return std::string(buf.data(), r.ptr);
}

std::pair<std::string, std::string> split_exponent(const std::string& s, bool scientific) {
  if (!scientific) return {s, ""};
  auto e = s.find('e');
  return {s.substr(0, e), s.substr(e)};
}

// numpy always shows the point ("1." and "1.e+00").
std::string with_point(const std::string& s, bool scientific) {
  auto [mant, exp] = split_exponent(s, scientific);
  if (mant.find('.') == std::string::npos) mant += '.';
  return mant + exp;
}

// `shortest` (x's unique digits) cut to at most `precision` digits after the
// point, rounding x's exact value (numpy's dragon4 'unique' with a cutoff).
template <class T>
std::string cut_to(const std::string& shortest, T x, bool scientific, int precision) {
  auto [mant, exp] = split_exponent(shortest, scientific);
  auto dot = mant.find('.');
  const int frac = dot == std::string::npos ? 0 : int(mant.size() - dot - 1);
  if (frac <= precision) return with_point(shortest, scientific);
  std::tie(mant, exp) = split_exponent(chars(x, scientific, precision), scientific);
  if (mant.find('.') != std::string::npos)
    while (mant.back() == '0') mant.pop_back();
  return with_point(mant + exp, scientific);
}

template <class T>
std::string dragon4(T x, bool scientific, int precision) {
  return cut_to(chars(x, scientific, std::nullopt), x, scientific, precision);
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

// numpy's FloatingFormat over `in` (each exactly a T). F16: float16 values
// held as floats, with float16's digits and its own ratio test (NumPy divides
// the half values in half precision).
template <class T, bool F16 = false>
std::vector<std::string> format_floats_t(const std::vector<double>& in, const FloatStyle& st) {
  const bool fixed = st.floatmode == "fixed";
  const bool equal = fixed || st.floatmode == "maxprec_equal";  // every value with the same digits
  const int precision = st.floatmode == "unique" ? std::numeric_limits<int>::max() : st.precision;
  const bool plus = st.sign == '+';
  auto sgn = [plus](T v, std::string s) { return plus && !std::signbit(v) ? "+" + s : s; };
  // A finite value's digits as dragon4 gives them to FloatingFormat.
  auto digits = [&](T v, bool sci) {
    if (fixed) return sgn(v, with_point(chars(v, sci, st.precision), sci));
    if constexpr (F16) return sgn(v, cut_to(dragon4_f16(v, sci), v, sci, precision));
    else return sgn(v, dragon4(v, sci, precision));
  };
  // v with exactly `frac` digits after the point: its unique digits, then
  // the exact value's (dragon4's min_digits).
  auto padded = [&](T v, bool sci, int frac) {
    std::string s = sgn(v, with_point(chars(v, sci, frac), sci));
    if constexpr (F16) {
      // float16's shortest digits that already fill `frac` stay as they are.
      std::string shortest = digits(v, sci);
      auto [m, e] = split_exponent(shortest, sci);
      if (int(m.size() - m.find('.') - 1) == frac) s = shortest;
    }
    return s;
  };
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
    if (any && (max_val >= T(1e8) || (!st.suppress && (min_val < T(0.0001) || ratio_big)))) exp_format = true;
  }
  int pad_left = 0, pad_right = 0, exp_size = -1, sci_precision = 0;
  if (finite.empty()) {
    pad_left = pad_right = 0;
  } else if (exp_format) {
    for (T v : finite) {
      auto [mant, ex] = split_exponent(digits(v, true), true);
      auto dot = mant.find('.');
      pad_left = std::max(pad_left, int(dot));
      sci_precision = std::max(sci_precision, int(mant.size() - dot - 1));
      exp_size = std::max(exp_size, int(ex.size()) - 2);  // "e+05": the digits
    }
    pad_right = exp_size + 2 + sci_precision;
  } else {
    for (T v : finite) {
      std::string s = digits(v, false);
      auto dot = s.find('.');
      pad_left = std::max(pad_left, int(dot));
      pad_right = std::max(pad_right, int(s.size() - dot - 1));
    }
  }
  if (st.sign == ' ' && std::none_of(finite.begin(), finite.end(), [](T v) { return std::signbit(v); }))
    pad_left += 1;
  if (finite.size() != vals.size()) {
    bool neg_inf = st.sign != '-';
    for (T v : vals)
      if (std::isinf(v) && v < 0) neg_inf = true;
    int offset = pad_right + 1;
    pad_left = std::max({pad_left, int(st.nanstr.size()) - offset, int(st.infstr.size()) + int(neg_inf) - offset});
  }
  std::vector<std::string> out;
  out.reserve(vals.size());
  for (T v : vals) {
    std::string w;
    if (!std::isfinite(v)) {
      std::string r = std::isnan(v) ? (plus ? "+" : "") + st.nanstr
                                     : (v < 0 ? "-" : plus ? "+" : "") + st.infstr;
      int width = pad_left + pad_right + 1;
      w = std::string(std::max(0, width - int(r.size())), ' ') + r;
    } else if (exp_format) {
      // Every value gets sci_precision digits.
      auto [mant, ex] = split_exponent(padded(v, true, sci_precision), true);
      auto dot = mant.find('.');
      std::string ip = mant.substr(0, dot), fp = mant.substr(dot + 1);
      char sign = ex[1];
      std::string edigits = ex.substr(2);
      if (int(edigits.size()) < exp_size) edigits.insert(0, std::size_t(exp_size) - edigits.size(), '0');
      w = std::string(std::max(0, pad_left - int(ip.size())), ' ') + ip + "." + fp + "e" + sign + edigits;
    } else {
      std::string s = equal ? padded(v, false, pad_right) : digits(v, false);
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

std::vector<std::string> format_float16(const std::vector<double>& values, const FloatStyle& style) {
  return format_floats_t<float, true>(values, style);
}

std::vector<std::string> format_floats(const std::vector<double>& values, bool single_precision,
                                       const FloatStyle& style) {
  return single_precision ? format_floats_t<float>(values, style) : format_floats_t<double>(values, style);
}

// numpy's ComplexFloatingFormat: the real parts formatted together, the
// imaginary parts together with an explicit sign, then 'j' before the
// imaginary part's padding.
std::vector<std::string> format_complex(const std::vector<std::complex<double>>& values, bool single_precision,
                                        const FloatStyle& style) {
  std::vector<double> re, im;
  for (auto z : values) re.push_back(z.real()), im.push_back(z.imag());
  FloatStyle imag_style = style;
  imag_style.sign = '+';
  auto r = single_precision ? format_floats_t<float>(re, style) : format_floats_t<double>(re, style);
  auto i = single_precision ? format_floats_t<float>(im, imag_style) : format_floats_t<double>(im, imag_style);
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
                                         const std::vector<std::int64_t>& shown, const FloatStyle& style) {
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
      return format_floats(v, std::is_same_v<T, float>, style);
    } else if constexpr (std::is_same_v<T, float16_t>) {
      std::vector<double> v;
      for (auto i : shown) v.push_back(double(float(p[i])));
      return format_float16(v, style);
    } else if constexpr (is_narrow_float_v<T>) {
      std::vector<std::string> words;  // ml_dtypes: each element's own text, unpadded
      for (auto i : shown) words.push_back(ml_dtypes_text(float(p[i])));
      return words;
    } else if constexpr (is_complex_v<T>) {
      std::vector<std::complex<double>> v;
      for (auto i : shown) v.push_back(std::complex<double>(p[i]));
      return format_complex(v, std::is_same_v<T, std::complex<float>>, style);
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
  Array2StringOptions opt = current_array2string_options();
  const int line_width = opt.linewidth;
  std::string s;
  if (numel(shape) == 0) {
    s = std::string("[], shape=").append(shape_str(shape));
  } else {
    opt.separator = ", ";
    opt.prefix = prefix;
    opt.suffix = ",";
    auto shown = shown_elements(shape, opt);
    s = layout_array(shape, format_elements(dtype, data, shape, shown, opt.floats), opt);
  }
  // As JAX: the dtype joins the last line unless that would pass the width.
  auto nl = s.rfind('\n');
  int last_line_len = int(s.size()) - (nl == std::string::npos ? -1 : int(nl)) + 1;
  std::string sep = " ";
  if (last_line_len + int(dtype_str.size()) + 1 > line_width) sep = std::string(prefix.size(), ' ');
  return prefix + s + "," + sep + dtype_str;
}

}  // namespace tessel::detail
