// jnp.packbits and jnp.unpackbits, composed of array ops as JAX composes
// them; frombuffer, fromstring and array_str: arrays from and to bytes and text.
#include <cstring>
#include <string>
#include <vector>

#include <tessel/creation.hpp>
#include <tessel/numpy.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/numpy_format.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

namespace {

// 7, 6, ..., 0 for "big" (the first element in the high bit), 0..7 for "little".
Array bit_positions(const std::string& bitorder, const char* what) {
  if (bitorder != "big" && bitorder != "little")
    throw ValueError(std::string(what) + ": 'order' must be either 'little' or 'big', got '" + bitorder + "'");
  Array bits = arange(0.0, 8.0, 1.0, DType::uint8);
  return bitorder == "big" ? flip(bits) : bits;
}

int norm(int axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    throw ValueError(std::string(what) + ": axis " + std::to_string(axis) + " is out of bounds for an array of rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

Array packbits(const Array& x, std::optional<int> axis, const std::string& bitorder) {
  if (!is_integral(x.dtype()) && !is_bool(x.dtype()))
    throw TypeError("packbits: expected an input array of integer or boolean data type, got " +
                    aval_str(x.dtype(), x.shape()));
  const Array bits = bit_positions(bitorder, "packbits");
  Array a = astype(greater(x, astype(zeros({}), x.dtype())), DType::uint8);
  int ax = 0;
  if (!axis) a = ravel(a);
  else ax = norm(*axis, x.ndim(), "packbits");
  a = swapaxes(a, ax, -1);
  Shape s = a.shape();
  const std::int64_t n = s.back(), rem = n % 8;
  if (rem) {
    std::vector<std::pair<std::int64_t, std::int64_t>> w(s.size(), {0, 0});
    w.back() = {0, 8 - rem};
    a = pad(a, w, 0);
  }
  Shape grouped(a.shape().begin(), a.shape().end() - 1);
  grouped.push_back(a.shape().back() / 8);
  grouped.push_back(8);
  a = reshape(a, grouped);
  Array packed = astype(sum(left_shift(a, bits), -1), DType::uint8);
  return swapaxes(packed, ax, -1);
}

Array unpackbits(const Array& x, std::optional<int> axis, std::optional<std::int64_t> count, const std::string& bitorder) {
  if (x.dtype() != DType::uint8)
    throw TypeError("unpackbits: expected an input array of unsigned byte data type (uint8), got " +
                    aval_str(x.dtype(), x.shape()));
  const Array bits = bit_positions(bitorder, "unpackbits");
  Array a = x;
  int ax = 0;
  if (!axis) a = ravel(a);
  else ax = norm(*axis, x.ndim(), "unpackbits");
  a = swapaxes(a, ax, -1);
  Shape with_bits = a.shape();
  with_bits.push_back(1);
  Array one = astype(ones({}), DType::uint8);
  Array unpacked = astype(greater(bitwise_and(reshape(a, with_bits), left_shift(one, bits)), astype(zeros({}), DType::uint8)),
                          DType::uint8);
  Shape flat(a.shape().begin(), a.shape().end() - 1);
  flat.push_back(a.shape().back() * 8);
  unpacked = reshape(unpacked, flat);
  if (count) {
    const std::int64_t have = flat.back();
    if (*count < 0) throw ValueError("unpackbits: count must be non-negative, got " + std::to_string(*count));
    if (*count > have) {
      std::vector<std::pair<std::int64_t, std::int64_t>> w(flat.size(), {0, 0});
      w.back() = {0, *count - have};
      unpacked = pad(unpacked, w, 0);
    } else {
      unpacked = unpacked.index({ellipsis, slice(0, *count)});
    }
  }
  return swapaxes(unpacked, ax, -1);
}

}  // namespace tessel

namespace tessel {

Array frombuffer(const void* data, std::size_t size, DType dtype, std::int64_t count, std::int64_t offset) {
  const std::size_t es = dtype_size(dtype);
  if (offset < 0 || std::size_t(offset) > size)
    throw ValueError("frombuffer: offset must be non-negative and no greater than buffer length (" +
                     std::to_string(size) + "), got " + std::to_string(offset));
  const std::size_t avail = size - std::size_t(offset);
  std::int64_t n = count;
  if (count < 0) {
    if (avail % es != 0)
      throw ValueError("frombuffer: buffer size (" + std::to_string(avail) + " bytes after the offset) must be a multiple of " +
                       dtype_name(dtype) + "'s element size " + std::to_string(es));
    n = std::int64_t(avail / es);
  } else if (std::size_t(count) * es > avail) {
    throw ValueError("frombuffer: buffer is smaller than requested size: " + std::to_string(count) + " " +
                     dtype_name(dtype) + " elements need " + std::to_string(std::size_t(count) * es) + " bytes, " +
                     std::to_string(avail) + " remain");
  }
  return detail::from_host(dtype, {n}, static_cast<const char*>(data) + offset);
}

Array frombuffer(const std::string& buffer, DType dtype, std::int64_t count, std::int64_t offset) {
  return frombuffer(buffer.data(), buffer.size(), dtype, count, offset);
}

Array fromstring(const std::string& string, const std::string& sep, DType dtype, std::int64_t count) {
  if (sep.empty())
    throw ValueError("fromstring: sep must name a separator (the binary mode of an empty sep is NumPy's deprecated one; "
                     "use frombuffer)");
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto trim = [&](std::string s) {
    std::size_t a = 0, b = s.size();
    while (a < b && space(s[a])) ++a;
    while (b > a && space(s[b - 1])) --b;
    return s.substr(a, b - a);
  };
  const std::string text = trim(string);
  std::vector<std::string> words;
  const bool any_space = trim(sep).empty();  // a blank separator: any run of whitespace
  for (std::size_t i = 0; i < text.size();) {
    std::size_t j = i;
    if (any_space) {
      while (j < text.size() && !space(text[j])) ++j;
      words.push_back(text.substr(i, j - i));
      while (j < text.size() && space(text[j])) ++j;
      i = j;
    } else {
      const std::string s = trim(sep);
      j = text.find(s, i);
      words.push_back(trim(text.substr(i, j == std::string::npos ? std::string::npos : j - i)));
      if (j == std::string::npos) break;
      i = j + s.size();
      if (i == text.size()) words.push_back("");
    }
  }
  if (count >= 0 && std::size_t(count) > words.size())
    throw ValueError("fromstring: string is smaller than requested size (" + std::to_string(words.size()) +
                     " values, " + std::to_string(count) + " asked)");
  if (count >= 0) words.resize(std::size_t(count));
  std::vector<double> values;
  for (auto& w : words) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (w.empty() || used != w.size())
      throw ValueError("fromstring: '" + w + "' in the string is not a number");
    values.push_back(v);
  }
  return astype(array(values), dtype);
}

std::string array_str(const Array& x) {
  std::vector<unsigned char> bytes(std::size_t(x.size()) * dtype_size(x.dtype()) + 1);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      auto v = x.to_vector<bool>();
      for (std::size_t i = 0; i < v.size(); ++i) bytes[i] = v[i];
    } else {
      auto v = x.to_vector<T>();
      if (!v.empty()) std::memcpy(bytes.data(), v.data(), v.size() * sizeof(T));
    }
  });
  return detail::numpy_str(x.dtype(), x.shape(), bytes.data());
}

}  // namespace tessel
