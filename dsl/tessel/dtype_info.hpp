// Facts about dtypes, as NumPy and ml_dtypes give them to JAX users:
// ts::finfo, ts::iinfo, ts::can_cast, ts::isdtype, ts::issubdtype
// (ts::promote_types and ts::result_type are in tessel/numpy.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tessel/core/dtype.hpp>

namespace tessel {

// np.finfo / ml_dtypes.finfo: the values are those of the dtype, as doubles
// (exact). A complex dtype's are its real part's.
struct FInfo {
  DType dtype;
  int bits;
  double eps, epsneg, max, min, tiny, smallest_normal, smallest_subnormal, resolution;
  int precision, nmant, nexp, iexp, maxexp, minexp, machep, negep;
};
// ValueError for a dtype that is not inexact.
FInfo finfo(DType dtype);

// np.iinfo: min and max of an integer dtype (max as uint64: uint64's does
// not fit an int64). ValueError for a dtype that is not an integer.
struct IInfo {
  DType dtype;
  int bits;
  std::int64_t min;
  std::uint64_t max;
  char kind;  // 'i' or 'u'
};
IInfo iinfo(DType dtype);

// np.can_cast(from, to, casting): "no" and "equiv" only the same dtype;
// "safe" when every value of `from` is a value of `to` (NumPy's table: bool
// to anything, integers to wider ones, int8/uint8 to float16, 16-bit
// integers to float32, 32- and 64-bit ones to float64, floats to floats of
// no less range and precision, reals to complex of their precision);
// "same_kind" also down within a kind (float64 to float32, int64 to int8)
// and along bool -> integer -> float -> complex; "unsafe" always.
// ValueError for another casting name.
bool can_cast(DType from, DType to, const std::string& casting = "safe");

// jnp.isdtype(dtype, kind): kind one of "bool", "signed integer",
// "unsigned integer", "integral", "real floating", "complex floating",
// "numeric", or a dtype's name; several kinds: any of them. ValueError for
// an unknown kind.
bool isdtype(DType dtype, const std::string& kind);
bool isdtype(DType dtype, const std::vector<std::string>& kinds);

// jnp.issubdtype(dtype, what): `what` a dtype (equality) or NumPy's abstract
// scalar class by name: "generic", "number", "integer", "signedinteger",
// "unsignedinteger", "inexact", "floating", "complexfloating", "bool_"
// (bfloat16 and the float8s are floating, as JAX makes them).
bool issubdtype(DType dtype, DType what);
bool issubdtype(DType dtype, const std::string& what);

}  // namespace tessel
