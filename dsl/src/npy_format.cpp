// The .npy header: reading NumPy's (any writer's: quotes, spacing and
// trailing commas vary), writing exactly what np.save writes.
#include "dsl/src/npy_format.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <vector>

#include <tessel/io.hpp>

#include "tessel/core/errors.hpp"

namespace tessel::detail::npy {

namespace {

[[noreturn]] void damaged(const std::string& file, const std::string& what) {
  throw FileError(cat("the .npy file ", file, " ", what));
}

// A Python literal as a .npy dict holds them: strings, integers, True,
// False, None, and tuples or lists of those (a structured type's descr is
// a list of tuples).
struct Literal {
  enum Kind { Str, Int, Bool, NoneV, Tuple, List, Paren } kind = NoneV;
  std::string text;        // Str: the value; Int: the digits as written
  bool flag = false;       // Bool
  std::vector<Literal> items;  // Tuple, List; Paren: the one parenthesized value
};

class DictParser {
 public:
  DictParser(std::string_view s, const std::string& file) : s_(s), file_(file) {}

  std::map<std::string, Literal> parse() {
    skip();
    expect('{');
    std::map<std::string, Literal> d;
    for (skip(); peek() != '}'; skip()) {
      Literal key = value();
      if (key.kind != Literal::Str) fail("has a key that is not a string");
      skip();
      expect(':');
      skip();
      d[key.text] = value();
      skip();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail(cat("has '", printable(peek()), "' where ',' or '}' should follow a value"));
    }
    ++i_;
    // After the dict: NumPy's padding (spaces) and the final newline only.
    for (; i_ < s_.size(); ++i_)
      if (s_[i_] != ' ' && s_[i_] != '\n' && s_[i_] != '\t' && s_[i_] != '\r' && s_[i_] != '\0')
        fail(cat("has '", printable(s_[i_]), "' after the header's dict"));
    return d;
  }

 private:
  static std::string printable(char c) {
    if (c >= 32 && c < 127) return std::string(1, c);
    return cat("\\x", "0123456789abcdef"[(unsigned char)c >> 4], "0123456789abcdef"[c & 15]);
  }
  [[noreturn]] void fail(const std::string& what) const {
    damaged(file_, cat("has a damaged header: its dict ", what, " (at byte ", i_, " of \"",
                       std::string(s_.substr(0, std::min<std::size_t>(s_.size(), 120))), "\")"));
  }
  char peek() const {
    if (i_ >= s_.size()) fail("ends early");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(cat("has '", printable(peek()), "' where '", c, "' should be"));
    ++i_;
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    const std::size_t end = i_ + w.size();
    if (end < s_.size() && (std::isalnum((unsigned char)s_[end]) || s_[end] == '_')) return false;
    i_ = end;
    return true;
  }

  Literal value() {
    if (++depth_ > 32) fail("nests too deeply");
    Literal v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = Literal::Str;
      v.text = string(c);
    } else if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++i_;
      bool comma = false;
      for (skip(); peek() != close; skip()) {
        v.items.push_back(value());
        skip();
        comma = false;
        if (peek() == ',') {
          ++i_;
          comma = true;
        } else if (peek() != close) {
          fail(cat("has '", printable(peek()), "' where ',' or '", close, "' should follow a value"));
        }
      }
      ++i_;
      // (3) is the integer 3 in Python, not a tuple; (3,) and () are tuples.
      v.kind = close == ']' ? Literal::List : v.items.size() == 1 && !comma ? Literal::Paren : Literal::Tuple;
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = Literal::Int;
      const std::size_t start = i_;
      if (c == '-' || c == '+') ++i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      v.text = std::string(s_.substr(start, i_ - start));
      if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2's long, in old files
      if (v.text == "-" || v.text == "+") fail("has a sign without digits");
    } else if (word("True")) {
      v.kind = Literal::Bool;
      v.flag = true;
    } else if (word("False")) {
      v.kind = Literal::Bool;
    } else if (word("None")) {
      v.kind = Literal::NoneV;
    } else {
      fail(cat("has '", printable(c), "' where a value should start"));
    }
    --depth_;
    return v;
  }

  std::string string(char quote) {
    ++i_;
    std::string out;
    for (;;) {
      const char c = peek();
      ++i_;
      if (c == quote) return out;
      if (c == '\n') fail("has a string that runs past the end of its line");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        default: out += e;  // \\ \' \" and anything else as itself
      }
    }
  }

  std::string_view s_;
  const std::string& file_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

const Literal& unparen(const Literal& v) { return v.kind == Literal::Paren ? unparen(v.items[0]) : v; }

std::string shape_repr(const Shape& s) { return shape_str(s); }  // Python's repr of a tuple of ints

}  // namespace

Header parse_dict(std::string_view text, const std::string& file) {
  auto d = DictParser(text, file).parse();
  std::vector<std::string> extra;
  for (auto& [k, v] : d)
    if (k != "descr" && k != "fortran_order" && k != "shape") extra.push_back("'" + k + "'");
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!d.count(key)) damaged(file, cat("has a damaged header: its dict has no '", key, "' key"));
  if (!extra.empty())
    damaged(file, cat("has a damaged header: its dict has the key ", extra.front(),
                      " besides 'descr', 'fortran_order' and 'shape'"));
  Header h;
  const Literal& descr = unparen(d["descr"]);
  if (descr.kind == Literal::List || descr.kind == Literal::Tuple)
    throw TypeError(cat("the .npy file ", file,
                        " holds a structured NumPy type (its 'descr' is a list of fields); tessel arrays have one "
                        "element type: bool, integers, floats or complex"));
  if (descr.kind != Literal::Str) damaged(file, "has a damaged header: its 'descr' is not a string");
  h.descr = descr.text;
  const Literal& order = unparen(d["fortran_order"]);
  if (order.kind != Literal::Bool) damaged(file, "has a damaged header: its 'fortran_order' is not True or False");
  h.fortran_order = order.flag;
  const Literal& shape = d["shape"];
  if (shape.kind != Literal::Tuple) damaged(file, "has a damaged header: its 'shape' is not a tuple");
  for (const Literal& dim : shape.items) {
    const Literal& v = unparen(dim);
    if (v.kind != Literal::Int) damaged(file, "has a damaged header: its 'shape' holds something other than integers");
    std::int64_t n = 0;
    const char* b = v.text.data() + (v.text[0] == '+' ? 1 : 0);
    const char* e = v.text.data() + v.text.size();
    auto [p, ec] = std::from_chars(b, e, n);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && p != e))
      damaged(file, cat("has a damaged header: its shape's dimension ", v.text, " does not fit an int64"));
    if (ec != std::errc()) damaged(file, cat("has a damaged header: its shape's dimension ", v.text, " is not a number"));
    if (n < 0) damaged(file, cat("has a damaged header: its shape has the negative dimension ", n));
    h.shape.push_back(n);
  }
  return h;
}

Header read_header(const ReadExact& read, std::uint64_t file_size, const std::string& file) {
  unsigned char pre[12] = {};
  const std::size_t have = std::size_t(std::min<std::uint64_t>(file_size, sizeof pre));
  read(pre, have);
  if (have >= 4 && std::memcmp(pre, "PK\x03\x04", 4) == 0)
    damaged(file, "is not a .npy file but a zip archive (an .npz?): read it with ts::load_npz");
  if (std::memcmp(pre, kMagic.data(), std::min(have, kMagic.size())) != 0)
    damaged(file, "is not a NumPy file: it does not start with NumPy's magic string \"\\x93NUMPY\"");
  if (have < 10) damaged(file, cat("is truncated: it has ", file_size, " bytes, less than a header's first 10"));
  Header h;
  h.major = pre[6];
  h.minor = pre[7];
  if (h.major < 1 || h.major > 3 || h.minor != 0)
    damaged(file, cat("has the format version ", h.major, ".", h.minor, ", which is not NumPy's 1.0, 2.0 or 3.0"));
  std::uint64_t len, prefix;
  if (h.major == 1) {
    len = std::uint64_t(pre[8]) | std::uint64_t(pre[9]) << 8;
    prefix = 10;
  } else {
    if (have < 12) damaged(file, cat("is truncated: it has ", file_size, " bytes, less than a version ", h.major,
                                     ".0 header's first 12"));
    len = std::uint64_t(pre[8]) | std::uint64_t(pre[9]) << 8 | std::uint64_t(pre[10]) << 16 |
          std::uint64_t(pre[11]) << 24;
    prefix = 12;
  }
  h.data_offset = prefix + len;
  if (h.data_offset > file_size)
    damaged(file, cat("is truncated: its header says it is ", h.data_offset, " bytes long, but the file has ",
                      file_size, " bytes"));
  std::string text(std::size_t(len), '\0');
  const std::size_t got = std::size_t(have - prefix);  // of the dict, read with the preamble
  std::memcpy(text.data(), pre + prefix, std::min<std::size_t>(got, text.size()));
  if (text.size() > got) read(text.data() + got, text.size() - got);
  Header d = parse_dict(text, file);
  h.descr = std::move(d.descr);
  h.fortran_order = d.fortran_order;
  h.shape = std::move(d.shape);
  return h;
}

std::string descr_of(DType dtype) {
  switch (dtype) {
    case DType::bool_: return "|b1";
    case DType::int8: return "|i1";
    case DType::uint8: return "|u1";
    case DType::int16: return "<i2";
    case DType::uint16: return "<u2";
    case DType::int32: return "<i4";
    case DType::uint32: return "<u4";
    case DType::int64: return "<i8";
    case DType::uint64: return "<u8";
    case DType::float16: return "<f2";
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::complex64: return "<c8";
    case DType::complex128: return "<c16";
    case DType::bfloat16: return "<V2";
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::float8_e8m0fnu:
    case DType::float4_e2m1fn: return "|V1";
  }
  throw InternalError(cat("descr_of: dtype ", int(dtype)));
}

std::string make_header(DType dtype, const Shape& shape) {
  // np.save's dict, byte for byte: its keys sorted, a trailing ", ", and
  // room for the first dimension to grow to 21 digits (format.py,
  // GROWTH_AXIS_MAX_DIGITS) before the alignment padding.
  std::string dict = cat("{'descr': '", descr_of(dtype), "', 'fortran_order': False, 'shape': ", shape_repr(shape),
                         ", }");
  if (!shape.empty()) dict.append(std::size_t(std::max<std::int64_t>(0, 21 - std::int64_t(std::to_string(shape[0]).size()))), ' ');
  auto wrap = [&](int major) {
    const std::size_t prefix = major == 1 ? 10 : 12;
    const std::size_t hlen = dict.size() + 1;  // the final newline
    const std::size_t pad = kAlign - (prefix + hlen) % kAlign;
    const std::size_t len = hlen + pad;
    std::string out(kMagic);
    out += char(major);
    out += char(0);
    for (std::size_t b = 0; b < prefix - 8; ++b) out += char((len >> (8 * b)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return std::pair{out, len};
  };
  auto [v1, len] = wrap(1);
  if (len <= 0xffff) return v1;
  return wrap(2).first;
}

DataType dtype_of_descr(const std::string& descr, std::optional<DType> wanted, bool only_unnamed,
                        const std::string& file) {
  auto unsupported = [&](const std::string& what) -> TypeError {
    return TypeError(cat("the .npy file ", file, " holds NumPy type '", descr, "' (", what,
                         "), which tessel has no dtype for"));
  };
  std::size_t i = 0;
  char order = '=';
  if (!descr.empty() && descr[0] && std::strchr("<>=|", descr[0])) order = descr[i++];
  if (i >= descr.size()) damaged(file, cat("has a damaged header: its 'descr' '", descr, "' is not a NumPy type string"));
  const char kind = descr[i++];
  switch (kind) {  // types NumPy has and tessel lacks ('<M8[s]', '|S5', '|O')
    case 'O': throw unsupported("Python objects");
    case 'S':
    case 'a': throw unsupported("byte strings");
    case 'U': throw unsupported("Unicode strings");
    case 'M': throw unsupported("datetimes");
    case 'm': throw unsupported("timedeltas");
    default: break;
  }
  const std::string digits = descr.substr(i);
  int size = 0;
  if (!digits.empty()) {
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (ec != std::errc() || p != digits.data() + digits.size())
      damaged(file, cat("has a damaged header: its 'descr' '", descr, "' is not a NumPy type string"));
  }
  const bool big = order == '>' || (order == '=' && std::endian::native == std::endian::big);
  std::optional<DType> named;
  switch (kind) {
    case 'b':
    case '?':
      if (size == 1 || (kind == '?' && digits.empty())) named = DType::bool_;
      break;
    case 'i':
      named = size == 1 ? DType::int8 : size == 2 ? DType::int16 : size == 4 ? DType::int32 : size == 8 ? DType::int64
                                                                                                        : named;
      break;
    case 'u':
      named = size == 1 ? DType::uint8 : size == 2 ? DType::uint16 : size == 4 ? DType::uint32 : size == 8 ? DType::uint64
                                                                                                          : named;
      break;
    case 'f':
      named = size == 2 ? DType::float16 : size == 4 ? DType::float32 : size == 8 ? DType::float64 : named;
      if (size == 12 || size == 16) throw unsupported("a long double");
      break;
    case 'c':
      named = size == 8 ? DType::complex64 : size == 16 ? DType::complex128 : named;
      if (size == 24 || size == 32) throw unsupported("a complex long double");
      break;
    case 'V': {
      // Raw bytes: how np.save records ml_dtypes' bfloat16 ('<V2') and
      // 8-bit floats ('|V1'); the file does not say which format they hold.
      if (size == 2) {
        const DType t = wanted.value_or(DType::bfloat16);
        if (dtype_size(t) != 2)
          throw TypeError(cat("the .npy file ", file, " holds 2-byte values of NumPy type '", descr,
                              "' (bfloat16 as np.save writes it), which cannot be read as ", dtype_name(t),
                              "; pass LoadOptions{.dtype = ts::bfloat16} (the default), float16, int16 or uint16"));
        return {t, big};
      }
      if (size == 1) {
        if (!wanted)
          throw TypeError(cat("the .npy file ", file, " holds 1-byte values of NumPy type '", descr,
                              "': an 8-bit float (np.save writes ml_dtypes' float8 types so), but the file does "
                              "not record which format; pass LoadOptions{.dtype = ts::float8_e4m3fn} or "
                              "LoadOptions{.dtype = ts::float8_e5m2}"));
        if (dtype_size(*wanted) != 1 || *wanted == DType::bool_)
          throw TypeError(cat("the .npy file ", file, " holds 1-byte values of NumPy type '", descr,
                              "', which cannot be read as ", dtype_name(*wanted),
                              "; pass float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float4_e2m1fn, int8 or uint8"));
        return {*wanted, false};
      }
      throw unsupported(cat("raw records of ", size, " bytes"));
    }
    default: break;
  }
  // Not a type NumPy has ('<f5', 'x4'): the header is damaged, not merely foreign.
  if (!named) damaged(file, cat("has a damaged header: its 'descr' '", descr, "' is not a NumPy type string"));
  if (wanted && *wanted != *named && !only_unnamed)
    throw TypeError(cat("the .npy file ", file, " holds ", dtype_name(*named), " (NumPy type '", descr,
                        "'), but LoadOptions asks for ", dtype_name(*wanted),
                        "; load it as it is and convert with ts::astype (LoadOptions::dtype is for the types a "
                        "file does not record: '|V1' and '<V2')"));
  return {*named, big && dtype_size(*named) > 1};
}

std::uint64_t data_bytes(const Shape& shape, std::size_t itemsize, const std::string& file) {
  const std::int64_t b = checked_bytes(shape, std::int64_t(itemsize));
  if (b < 0 || checked_bytes(shape, 1) < 0)
    damaged(file, cat("has a damaged header: its shape ", shape_str(shape), " has more elements or bytes than an "
                      "int64 can count"));
  return std::uint64_t(b);
}

void byteswap(void* data, std::int64_t n, DType dtype) {
  const std::size_t part = is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
  if (part == 1) return;
  auto* p = static_cast<unsigned char*>(data);
  const std::size_t parts = std::size_t(n) * (dtype_size(dtype) / part);
  for (std::size_t k = 0; k < parts; ++k, p += part) std::reverse(p, p + part);
}

void fortran_to_c(const void* src, void* dst, const Shape& shape, std::size_t itemsize) {
  const std::int64_t n = numel(shape);
  if (n == 0) return;
  const int r = int(shape.size());
  // Element (i_0, ..., i_{r-1}) of a Fortran-order array is at
  // sum(i_k * prod(shape[:k])) in its data.
  std::vector<std::int64_t> fstride(std::size_t(r), 1), idx(std::size_t(r), 0);
  for (int k = 1; k < r; ++k) fstride[k] = fstride[k - 1] * shape[k - 1];
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  std::int64_t off = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    std::memcpy(d + std::size_t(e) * itemsize, s + std::size_t(off) * itemsize, itemsize);
    for (int k = r - 1; k >= 0; --k) {  // the next C-order index
      off += fstride[k];
      if (++idx[k] < shape[k]) break;
      off -= fstride[k] * shape[k];
      idx[k] = 0;
    }
  }
}

}  // namespace tessel::detail::npy
