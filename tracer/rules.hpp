// Every primitive's rules, in one table.
//
// Each op has one `Rule<Op::x>`, declared here for every op of the list and
// defined in the file of its family (tracer/rules_<family>.cpp), holding all
// that op's rules side by side: its shape/dtype rule and its reference
// kernel (later also JVP, transpose, batching and sharding rules). The table
// is built from the op list, so an op whose rules are missing does not link.
#pragma once

#include <functional>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel {

// Host arrays of the reference interpreter are Literals.
using HostArray = Literal;

struct OpRules {
  // The result's aval from the operands' (and, for ops whose result type is a
  // parameter — parameter, constant, iota, reshape, broadcast, convert — the
  // declared aval). Throws ShapeError/TypeError for bad operands.
  Aval (*infer)(const std::vector<Aval>& in, const Params& p, const Aval& declared);
  // The reference kernel: plain loops over host arrays.
  void (*eval)(const std::vector<const HostArray*>& in, const Params& p, const Aval& out_aval, HostArray& out);
};

const OpRules& rules(Op op);

template <Op op>
struct Rule;

#define TESSEL_X(e, text, family)                                                                   \
  template <>                                                                                       \
  struct Rule<Op::e> {                                                                              \
    static Aval infer(const std::vector<Aval>& in, const Params& p, const Aval& declared);          \
    static void eval(const std::vector<const HostArray*>& in, const Params& p, const Aval& out_aval, \
                     HostArray& out);                                                               \
  };
TESSEL_OPS(TESSEL_X)
#undef TESSEL_X

// Helpers the family files share.
namespace rule_util {
// "f32[4,8] and s32[4,8]" style operand lists for messages.
std::string avals_str(const std::vector<Aval>& in);
void expect_arity(Op op, const std::vector<Aval>& in, size_t n);
// A fresh host array of `aval` (zeroed).
void allocate(HostArray& out, const Aval& aval);
}  // namespace rule_util

}  // namespace tessel
