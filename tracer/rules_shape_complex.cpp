// The shape family's complex expansion and cost rules (its other rules are
// in tracer/rules_shape.cpp; the expansion is codegen/complex.hpp).
#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tracer/rules.hpp"

namespace tessel {

// ------------------------------------------------------------------ complex expansion, cost
// Packed, a complex array is its real array with a trailing [2]: data
// movement moves the pairs (the same op over one more dimension).

TESSEL_COMPLEX_NEVER(parameter)
NodeRef Rule<Op::constant>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>&) {
  auto l = std::make_shared<Literal>(*n.attr<attr::Constant>().value);
  l->dtype = real_dtype(l->dtype);
  l->shape.push_back(2);
  return build::constant(b.table(), l, n.aval.weak_type);
}
NodeRef Rule<Op::iota>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>&) {
  NodeRef re = build::iota(b.table(), real_dtype(n.dtype()), n.shape(), n.attr<attr::Iota>().dimension);
  return b.pack({re, b.zeros(re->dtype(), n.shape())});
}
NodeRef Rule<Op::broadcast_in_dim>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const std::int64_t r = std::int64_t(n.shape().size());
  return build::broadcast_in_dim(b.table(), ops[0], appended(n.shape(), std::int64_t(2)),
                                 appended(n.attr<attr::Dimensions>().dims, r));
}
NodeRef Rule<Op::reshape>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  return build::reshape(b.table(), ops[0], appended(n.shape(), std::int64_t(2)));
}
NodeRef Rule<Op::transpose>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  return build::transpose(b.table(), ops[0], appended(n.attr<attr::Dimensions>().dims, std::int64_t(n.shape().size())));
}
NodeRef Rule<Op::rev>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  return build::rev(b.table(), ops[0], n.attr<attr::Dimensions>().dims);
}
NodeRef Rule<Op::slice>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& s = n.attr<attr::Slice>();
  std::vector<std::int64_t> stride = s.stride;
  if (!stride.empty()) stride.push_back(1);
  return build::slice(b.table(), ops[0], appended(s.start, std::int64_t(0)), appended(s.limit, std::int64_t(2)), stride);
}
NodeRef Rule<Op::pad>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& p = n.attr<attr::Pad>();
  Parts x = b.unpack(ops[0]), v = b.unpack(ops[1]);
  return b.pack({build::pad(b.table(), x.re, v.re, p.low, p.high, p.interior),
                 build::pad(b.table(), x.im, v.im, p.low, p.high, p.interior)});
}
NodeRef Rule<Op::concatenate>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  return build::concatenate(b.table(), ops, n.attr<attr::Dimension>().dimension);
}
// The starts gain a 0 for the pair dimension.
NodeRef Rule<Op::dynamic_slice>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  std::vector<NodeRef> starts(ops.begin() + 1, ops.end());
  starts.push_back(build::scalar(b.table(), starts.empty() ? DType::int32 : starts[0]->dtype(), 0));
  return build::dynamic_slice(b.table(), ops[0], starts, appended(n.attr<attr::DynamicSlice>().sizes, std::int64_t(2)));
}
NodeRef Rule<Op::dynamic_update_slice>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  std::vector<NodeRef> starts(ops.begin() + 2, ops.end());
  starts.push_back(build::scalar(b.table(), starts.empty() ? DType::int32 : starts[0]->dtype(), 0));
  return build::dynamic_update_slice(b.table(), ops[0], ops[1], starts);
}

TESSEL_COST(parameter, no_cost)
TESSEL_COST(constant, no_cost)
TESSEL_COST(iota, no_cost)
TESSEL_COST(broadcast_in_dim, memory_cost)
TESSEL_COST(reshape, memory_cost)
TESSEL_COST(transpose, memory_cost)
TESSEL_COST(rev, memory_cost)
TESSEL_COST(slice, memory_cost)
TESSEL_COST(pad, memory_cost)
TESSEL_COST(concatenate, memory_cost)
TESSEL_COST(dynamic_slice, memory_cost)
TESSEL_COST(dynamic_update_slice, memory_cost)

}  // namespace tessel
