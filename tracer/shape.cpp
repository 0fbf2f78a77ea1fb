#include "tessel/core/shape.hpp"

#include <algorithm>
#include <sstream>

#include "tessel/core/errors.hpp"

namespace tessel {

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::int64_t checked_bytes(const Shape& s, std::int64_t element_bytes) {
  std::int64_t n = element_bytes;
  bool zero = false;
  for (auto d : s) zero = zero || d == 0;
  if (zero) return 0;
  for (auto d : s) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

void check_shape(const Shape& s, DType t, const std::string& where) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 0)
      throw ShapeError(detail::cat(where, ": negative dimensions are not allowed, got shape ", shape_str(s), " (",
                                   dtype_name(t), ")"));
  // A zero dimension makes the array empty, whatever the others are.
  if (checked_bytes(s, 1) < 0 || checked_bytes(s, std::int64_t(dtype_size(t))) < 0)
    throw ShapeError(detail::cat(where, ": shape ", shape_str(s), " of ", dtype_name(t),
                                 " has more elements or bytes than an int64 can count"));
}

std::vector<std::int64_t> row_major_strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ',';
  os << ')';
  return os.str();
}

std::string aval_str(DType t, const Shape& s) {
  std::ostringstream os;
  os << dtype_name(t) << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

Shape Box::extent() const {
  Shape e(start.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = std::max<std::int64_t>(0, stop[i] - start[i]);
  return e;
}

bool Box::empty() const {
  for (size_t i = 0; i < start.size(); ++i)
    if (stop[i] <= start[i]) return true;
  return false;
}

Box intersect(const Box& a, const Box& b) {
  TESSEL_CHECK_INTERNAL(a.start.size() == b.start.size());
  Box r{a.start, a.stop};
  for (size_t i = 0; i < r.start.size(); ++i) {
    r.start[i] = std::max(a.start[i], b.start[i]);
    r.stop[i] = std::max(r.start[i], std::min(a.stop[i], b.stop[i]));
  }
  return r;
}

Box full_box(const Shape& s) { return Box{std::vector<std::int64_t>(s.size(), 0), s}; }

}  // namespace tessel
