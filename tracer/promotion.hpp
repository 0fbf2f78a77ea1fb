// JAX's type promotion: the join on its type lattice, with weak types (the
// types of C++ scalars, which act as Python scalars). Without x64-style
// canonicalisation: tessel has int64 and float64 as real dtypes.
//
//   bool -> i* -> {u32, i32} ;  u32, i32 -> i64 -> f* -> f32 -> f64
//   f* -> c* -> c64 -> c128 ;  f32 -> c64 ;  f64 -> c128
//   (i*, f*, c*: weak int, weak float and weak complex)
#pragma once

#include "tessel/core/dtype.hpp"

namespace tessel {

struct PromotedType {
  DType dtype;
  bool weak;
};

// The result type of combining two typed values, as jnp.promote_types.
PromotedType promote_types(DType a, bool a_weak, DType b, bool b_weak);

}  // namespace tessel
