#include <tessel/dtype_info.hpp>

#include <cmath>
#include <limits>

#include <tessel/core/errors.hpp>

namespace tessel {

namespace {

// A float format: significand bits (with the implicit one), the exponent of
// its smallest normal and of its largest finite value, its largest value.
struct FloatFacts {
  int bits, digits, emin, emax;
  double max;
  bool inf;
};

FloatFacts float_facts(DType t) {
  return visit_dtype(real_dtype(t), [&](auto tag) -> FloatFacts {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || is_narrow_float_v<T>) {
      using L = std::numeric_limits<T>;
      const int bits = std::is_same_v<T, float4_e2m1fn_t> ? 4 : int(8 * sizeof(T));
      return {bits, L::digits, L::min_exponent - 1, L::max_exponent - 1, double(float(L::max())), L::has_infinity};
    } else {
      throw ValueError(std::string("finfo: data type ") + dtype_name(t) + " not inexact");
    }
  });
}

double round_to(DType t, double v) {
  return visit_dtype(t, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (is_narrow_float_v<T>) return double(float(T(v)));
    else if constexpr (std::is_floating_point_v<T>) return double(T(v));
    else return v;
  });
}

enum class Kind { b, i, u, f, c };
Kind kind_of(DType t) {
  switch (dtype_kind(t)) {
    case 'b': return Kind::b;
    case 'i': return Kind::i;
    case 'u': return Kind::u;
    case 'f': return Kind::f;
    default: return Kind::c;
  }
}

// Every value of `from` is a value of `to`.
bool safe(DType from, DType to) {
  if (from == to || from == DType::bool_) return true;
  const Kind a = kind_of(from), b = kind_of(to);
  if (b == Kind::b) return false;
  const int sa = int(dtype_size(from)), sb = int(dtype_size(to));
  if (a == Kind::i || a == Kind::u) {
    if (b == Kind::i) return a == Kind::i ? sb >= sa : sb > sa;
    if (b == Kind::u) return a == Kind::u && sb >= sa;
    // To a float: NumPy's table (int64 and uint64 to float64 included,
    // though float64 does not hold every one), the narrow floats when
    // their significand holds every value.
    const FloatFacts f = float_facts(to);
    if (sa == 8) return f.digits >= 53;
    const int magnitude_bits = 8 * sa - (a == Kind::i ? 1 : 0);
    return f.digits >= magnitude_bits && f.emax >= magnitude_bits;
  }
  if (a == Kind::c) return b == Kind::c && sb >= sa;
  if (b == Kind::i || b == Kind::u) return false;  // a float to an integer
  // a float to a float or a complex: no less range and precision.
  const FloatFacts x = float_facts(from), y = float_facts(to);
  const bool holds = y.digits >= x.digits && y.emax >= x.emax && y.emin - y.digits <= x.emin - x.digits &&
                     (y.inf || !x.inf);
  return holds;
}

}  // namespace

FInfo finfo(DType dtype) {
  const DType t = real_dtype(dtype);
  const FloatFacts f = float_facts(t);
  // ml_dtypes' own tables for the MX formats (ml_dtypes/_finfo.py).
  if (t == DType::float8_e8m0fnu)  // no sign, no mantissa: every value a power of two
    return FInfo{t, 8, 1.0, 0.5, 0x1p127, 0x1p-127, 0x1p-127, 0x1p-127, 0x1p-127, 0.125, 1, 0, 8, 8, 128, -127, 0, -1};
  if (t == DType::float4_e2m1fn)
    return FInfo{t, 4, 0.5, 0.5, 6.0, -6.0, 1.0, 1.0, 0.5, 1.0, 0, 1, 2, 2, 3, 0, -1, -1};
  FInfo r;
  r.dtype = t;
  r.bits = f.bits;
  r.nmant = f.digits - 1;
  r.nexp = f.bits - 1 - r.nmant;
  r.iexp = r.nexp;
  r.machep = -r.nmant;
  r.negep = -r.nmant - 1;
  r.eps = std::ldexp(1.0, r.machep);
  r.epsneg = std::ldexp(1.0, r.negep);
  r.max = f.max;
  r.min = -f.max;
  r.tiny = r.smallest_normal = std::ldexp(1.0, f.emin);
  r.smallest_subnormal = std::ldexp(1.0, f.emin - r.nmant);
  r.minexp = f.emin;
  r.maxexp = f.emax + 1;
  // NumPy's int(-log10(eps)); ml_dtypes gives the float8s 1.
  r.precision = std::max(1, int(-std::log10(r.eps)));
  r.resolution = round_to(t, std::pow(10.0, -r.precision));
  return r;
}

IInfo iinfo(DType dtype) {
  if (!is_integral(dtype)) throw ValueError(std::string("iinfo: invalid integer data type ") + dtype_name(dtype));
  return visit_dtype(dtype, [&](auto tag) -> IInfo {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      using L = std::numeric_limits<T>;
      return {dtype, int(8 * sizeof(T)), std::int64_t(L::min()), std::uint64_t(L::max()), dtype_kind(dtype)};
    } else {
      throw ValueError(std::string("iinfo: invalid integer data type ") + dtype_name(dtype));
    }
  });
}

bool can_cast(DType from, DType to, const std::string& casting) {
  if (casting == "no" || casting == "equiv") return from == to;
  if (casting == "unsafe") return true;
  if (casting == "safe") return safe(from, to);
  if (casting == "same_kind") {
    if (safe(from, to)) return true;
    return int(kind_of(from)) <= int(kind_of(to)) && !(kind_of(from) == Kind::i && kind_of(to) == Kind::u) &&
           kind_of(to) != Kind::b;
  }
  throw ValueError("can_cast: casting must be one of 'no', 'equiv', 'safe', 'same_kind', or 'unsafe', got '" + casting +
                   "'");
}

bool isdtype(DType t, const std::string& kind) {
  if (kind == "bool") return is_bool(t);
  if (kind == "signed integer") return is_signed_int(t);
  if (kind == "unsigned integer") return is_unsigned_int(t);
  if (kind == "integral") return is_integral(t);
  if (kind == "real floating") return is_floating(t);
  if (kind == "complex floating") return is_complex(t);
  if (kind == "numeric") return !is_bool(t);
  try {
    return t == dtype_from_name(kind);
  } catch (const TypeError&) {
    throw ValueError("isdtype: kind must be a dtype or one of 'bool', 'signed integer', 'unsigned integer', "
                     "'integral', 'real floating', 'complex floating', 'numeric', got '" + kind + "'");
  }
}

bool isdtype(DType t, const std::vector<std::string>& kinds) {
  bool any = false;
  for (auto& k : kinds) any = isdtype(t, k) || any;
  return any;
}

bool issubdtype(DType t, DType what) { return t == what; }

bool issubdtype(DType t, const std::string& what) {
  if (what == "generic") return true;
  if (what == "number") return !is_bool(t);
  if (what == "integer") return is_integral(t);
  if (what == "signedinteger") return is_signed_int(t);
  if (what == "unsignedinteger") return is_unsigned_int(t);
  if (what == "inexact") return is_inexact(t);
  if (what == "floating") return is_floating(t);
  if (what == "complexfloating") return is_complex(t);
  if (what == "bool_" || what == "bool") return is_bool(t);
  try {
    return t == dtype_from_name(what);
  } catch (const TypeError&) {
    throw ValueError("issubdtype: '" + what + "' is neither a dtype nor one of NumPy's abstract scalar types "
                     "(generic, number, integer, signedinteger, unsignedinteger, inexact, floating, "
                     "complexfloating, bool_)");
  }
}

}  // namespace tessel
