#include "tracer/promotion.hpp"

#include <string>
#include <vector>

#include "tessel/core/errors.hpp"

namespace tessel {

namespace {

// Lattice nodes.
enum Node { B1, IW, FW, CW, U8, U16, U32, U64, I8, I16, I32, I64, BF16, F16, F32, F64, F8E4M3, F8E5M2, F8E8M0, F4E2M1, C64, C128, kNodes };

Node node_of(DType t, bool weak) {
  if (weak && t != DType::bool_) {
    if (is_integral(t)) return IW;
    if (is_floating(t)) return FW;
    return CW;
  }
  switch (t) {
    case DType::bool_: return B1;
    case DType::uint8: return U8;
    case DType::uint16: return U16;
    case DType::uint32: return U32;
    case DType::uint64: return U64;
    case DType::int8: return I8;
    case DType::int16: return I16;
    case DType::int32: return I32;
    case DType::int64: return I64;
    case DType::bfloat16: return BF16;
    case DType::float16: return F16;
    case DType::float32: return F32;
    case DType::float64: return F64;
    case DType::float8_e4m3fn: return F8E4M3;
    case DType::float8_e5m2: return F8E5M2;
    case DType::float8_e8m0fnu: return F8E8M0;
    case DType::float4_e2m1fn: return F4E2M1;
    case DType::complex64: return C64;
    case DType::complex128: return C128;
  }
  __builtin_unreachable();
}

// The nodes above each node (itself included), from the edges above.
const std::vector<std::vector<Node>>& upper_sets() {
  static const std::vector<std::vector<Node>> ups = [] {
    std::vector<std::vector<Node>> succ(kNodes);
    succ[B1] = {IW};
    succ[IW] = {U8, I8};
    succ[U8] = {I16, U16};
    succ[U16] = {I32, U32};
    succ[U32] = {I64, U64};
    succ[U64] = {FW};
    succ[I8] = {I16};
    succ[I16] = {I32};
    succ[I32] = {I64};
    succ[I64] = {FW};
    succ[FW] = {F8E4M3, F8E5M2, F8E8M0, F4E2M1, BF16, F16, CW};
    succ[BF16] = {F32};
    succ[F16] = {F32};
    succ[F32] = {F64, C64};
    succ[F64] = {C128};
    succ[CW] = {C64};
    succ[C64] = {C128};
    std::vector<std::vector<Node>> up(kNodes);
    for (int n = 0; n < kNodes; ++n) {
      std::vector<bool> seen(kNodes, false);
      std::vector<Node> stack{Node(n)};
      while (!stack.empty()) {
        Node x = stack.back();
        stack.pop_back();
        if (seen[x]) continue;
        seen[x] = true;
        up[n].push_back(x);
        for (Node s : succ[x]) stack.push_back(s);
      }
    }
    return up;
  }();
  return ups;
}

}  // namespace

PromotedType promote_types(DType a, bool a_weak, DType b, bool b_weak) {
  Node x = node_of(a, a_weak), y = node_of(b, b_weak);
  const auto& ups = upper_sets();
  // The least upper bound: the common upper node whose own upper set holds
  // every common upper node.
  std::vector<Node> common;
  for (Node u : ups[x])
    for (Node v : ups[y])
      if (u == v) common.push_back(u);
  for (Node c : common) {
    bool least = true;
    for (Node d : common) {
      bool above = false;
      for (Node e : ups[c]) above = above || e == d;
      least = least && above;
    }
    if (least) {
      switch (c) {
        case B1: return {DType::bool_, false};
        case IW: return {a_weak ? a : b, true};
        // A weak float: float32 (JAX's default float), float64 only when
        // both operands are float64 (weak C++ doubles keep their bits).
        case FW: return {a == DType::float64 && b == DType::float64 ? DType::float64 : DType::float32, true};
        case U8: return {DType::uint8, false};
        case U16: return {DType::uint16, false};
        case U32: return {DType::uint32, false};
        case U64: return {DType::uint64, false};
        case I8: return {DType::int8, false};
        case I16: return {DType::int16, false};
        case I32: return {DType::int32, false};
        case I64: return {DType::int64, false};
        case BF16: return {DType::bfloat16, false};
        case F16: return {DType::float16, false};
        case F8E4M3: return {DType::float8_e4m3fn, false};
        case F8E5M2: return {DType::float8_e5m2, false};
        case F8E8M0: return {DType::float8_e8m0fnu, false};
        case F4E2M1: return {DType::float4_e2m1fn, false};
        case F32: return {DType::float32, false};
        case F64: return {DType::float64, false};
        // A weak complex: complex64, complex128 when both operands are of
        // double precision (weak C++ std::complex<double> and double).
        case CW: {
          auto wide = [](DType t) { return t == DType::float64 || t == DType::complex128; };
          return {wide(a) && wide(b) ? DType::complex128 : DType::complex64, true};
        }
        case C64: return {DType::complex64, false};
        case C128: return {DType::complex128, false};
        case kNodes: break;
      }
    }
  }
  // JAX's TypePromotionError (it names the 8-bit floats first, then the 4-bit ones).
  auto f8 = [](DType t) {
    return t == DType::float8_e4m3fn || t == DType::float8_e5m2 || t == DType::float8_e8m0fnu;
  };
  const char* width = f8(a) || f8(b) ? "8-bit" : "4-bit";
  throw TypeError(std::string("Input dtypes ('") + dtype_name(a) + "', '" + dtype_name(b) +
                  "') have no available implicit dtype promotion path. To avoid unintended promotion, " + width +
                  " floats do not support implicit promotion. If you'd like your inputs to be promoted to another "
                  "type, you can do so explicitly using e.g. x.astype('float32')");
}

}  // namespace tessel
