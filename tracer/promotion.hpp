// JAX's type promotion: the join on its type lattice, with weak types (the
// types of C++ scalars, which act as Python scalars). Without x64-style
// canonicalisation: tessel has int64 and float64 as real dtypes.
//
// JAX's "standard" lattice (jax/_src/dtypes.py, _type_promotion_lattice):
//   bool -> i* -> {u8, i8}
//   u8 -> {i16, u16} ; u16 -> {i32, u32} ; u32 -> {i64, u64} ; u64 -> f*
//   i8 -> i16 -> i32 -> i64 -> f*
//   f* -> {f8_e4m3fn, f8_e5m2, bf16, f16, c*} ; bf16, f16 -> f32 -> {f64, c64}
//   f64 -> c128 ; c* -> c64 -> c128 ; the float8s have nothing above them
//   (i*, f*, c*: weak int, weak float and weak complex)
// Two types with no common upper bound (a float8 with any other float, as
// JAX refuses them) are a TypeError.
#pragma once

#include "tessel/core/dtype.hpp"

namespace tessel {

struct PromotedType {
  DType dtype;
  bool weak;
};

// The result type of combining two typed values, as jnp.promote_types;
// TypeError when they have no common upper bound.
PromotedType promote_types(DType a, bool a_weak, DType b, bool b_weak);

}  // namespace tessel
