#include "tracer/promotion.hpp"

#include <vector>

namespace tessel {

namespace {

// Lattice nodes.
enum Node { B1, IW, FW, U32, I32, I64, F32, F64, CW, C64, C128, kNodes };

Node node_of(DType t, bool weak) {
  switch (t) {
    case DType::bool_: return B1;
    case DType::int32: return weak ? IW : I32;
    case DType::int64: return weak ? IW : I64;
    case DType::uint32: return weak ? IW : U32;
    case DType::float32: return weak ? FW : F32;
    case DType::float64: return weak ? FW : F64;
    case DType::complex64: return weak ? CW : C64;
    case DType::complex128: return weak ? CW : C128;
  }
  __builtin_unreachable();
}

// The nodes above each node (itself included), from the edges above.
const std::vector<std::vector<Node>>& upper_sets() {
  static const std::vector<std::vector<Node>> ups = [] {
    std::vector<std::vector<Node>> succ(kNodes);
    succ[B1] = {IW};
    succ[IW] = {U32, I32};
    succ[U32] = {I64};
    succ[I32] = {I64};
    succ[I64] = {FW};
    succ[FW] = {F32, CW};
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
        case U32: return {DType::uint32, false};
        case I32: return {DType::int32, false};
        case I64: return {DType::int64, false};
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
  return {DType::float64, false};
}

}  // namespace tessel
