#include "tracer/rules.hpp"

#include <sstream>

#include "tracer/errors.hpp"

namespace tessel {

namespace {
const OpRules kRules[] = {
#define TESSEL_X(e, text, family) {&Rule<Op::e>::infer, &Rule<Op::e>::eval, &Rule<Op::e>::factors},
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kNumOps);

const char* kOpNames[] = {
#define TESSEL_X(e, text, family) text,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

const OpFamily kOpFamilies[] = {
#define TESSEL_X(e, text, family) OpFamily::family,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
}  // namespace

const OpRules& rules(Op op) { return kRules[int(op)]; }
const char* op_name(Op op) { return kOpNames[int(op)]; }
OpFamily op_family(Op op) { return kOpFamilies[int(op)]; }

bool is_commutative(Op op) {
  return op == Op::add || op == Op::mul || op == Op::max || op == Op::min || op == Op::and_ || op == Op::or_ ||
         op == Op::xor_ || op == Op::eq || op == Op::ne;
}

namespace rule_util {

std::string avals_str(const std::vector<Aval>& in) {
  std::ostringstream os;
  for (size_t i = 0; i < in.size(); ++i) os << (i ? (i + 1 == in.size() ? " and " : ", ") : "") << in[i].str();
  return os.str();
}

void expect_arity(Op op, const std::vector<Aval>& in, size_t n) {
  if (in.size() != n)
    throw InternalError(detail::cat(op_name(op), " takes ", n, " operands, got ", in.size()));
}

void allocate(HostArray& out, const Aval& aval) {
  out.dtype = aval.dtype;
  out.shape = aval.shape;
  out.bytes.assign(std::size_t(numel(aval.shape)) * dtype_size(aval.dtype), 0);
}

FactorRule elementwise_factors(const Node& n) {
  FactorRule r;
  for (auto d : n.shape()) r.add_factor(d);
  for (auto& x : n.in) {
    std::vector<std::vector<int>> dims;
    // Scalar operands (pad values, dynamic starts) take no factors.
    for (int d = 0; d < x->rank(); ++d) dims.push_back(x->rank() == n.rank() ? std::vector<int>{d} : std::vector<int>{});
    r.operands.push_back(dims);
  }
  for (int d = 0; d < n.rank(); ++d) r.result.push_back({d});
  return r;
}

FactorRule replicated_factors(const Node& n) {
  FactorRule r;
  for (auto& x : n.in) {
    std::vector<std::vector<int>> dims;
    for (auto s : x->shape()) dims.push_back({r.add_factor(s, false, true)});
    r.operands.push_back(dims);
  }
  for (auto s : n.shape()) r.result.push_back({r.add_factor(s, false, true)});
  return r;
}

FactorRule leaf_factors(const Node& n) {
  FactorRule r;
  for (auto s : n.shape()) r.result.push_back({r.add_factor(s)});
  return r;
}

}  // namespace rule_util

int FactorRule::add_factor(std::int64_t size, bool is_reduction, bool replicate) {
  sizes.push_back(size);
  reduction.push_back(is_reduction);
  need_replication.push_back(replicate);
  return int(sizes.size()) - 1;
}
}  // namespace tessel
