// The rules only the control-flow ops (cond, while_, scan) have, beside
// their Rule<op> entries: how their regions' boundaries take shardings
// (propagation), how they are typed in shard_map bodies (vma), and how the
// reference interpreter runs them. ControlRule<op> is defined for exactly
// the ops is_control_flow names (tracer/rules_control_regions.cpp), and the
// table is built from the op list: a control-flow op without them does not
// build, and no pass switches over them.
#pragma once

#include <functional>
#include <vector>

#include "tracer/propagate.hpp"
#include "tracer/rules.hpp"
#include "tracer/vma.hpp"

namespace tessel {

// ------------------------------------------------------------------ propagation

// What propagation through region g gives its parameters and outputs, its
// parameters laid out as `params` (chosen by propagation where `open` says).
struct RegionValues {
  std::vector<AxisSharding> params, outputs;
};
RegionValues region_values(const Graph& g, const MeshRef& mesh, const std::vector<AxisSharding>& params,
                           const std::vector<bool>& open = {});

// ------------------------------------------------------------------ vma typing

// The typing of a control-flow op from its operands': each region's
// parameters, the vma its outputs must reach, and the op's results.
struct ControlTyping {
  std::vector<std::vector<AxisSet>> params, outputs;  // per region, Attrs::regions() order
  std::vector<AxisSet> results;
};
// What a typing rule may use (tracer/vma.cpp implements it).
class RegionTyper {
 public:
  virtual ~RegionTyper() = default;
  virtual const DeviceMesh& mesh() const = 0;
  // The vma of g's outputs, its parameters varying over `params`.
  virtual std::vector<AxisSet> outputs_of(const Graph& g, const std::vector<AxisSet>& params) = 0;
  // Refuses n when `control` (its branch index or predicate, named `what`)
  // varies over some axis while `regions` could need collectives: devices
  // taking different paths would never meet.
  virtual void no_collectives(const Node& n, const AxisSet& control, const char* what,
                              const std::vector<GraphRef>& regions) = 0;
};

// ------------------------------------------------------------------ interpreter

// One value per device position: a node's result(s) as host arrays.
using InterpValue = std::vector<HostArray>;
using PerDevice = std::vector<InterpValue>;
// Runs a region on every position's values: [param][position] -> [output][position].
using RunGraph = std::function<std::vector<PerDevice>(const Graph&, std::vector<PerDevice>)>;

// ------------------------------------------------------------------ the table

struct ControlRules {
  // The op's boundary from its operands' shardings (`open`: not known yet,
  // propagation chooses).
  RegionShardings (*boundary)(const Node& n, const std::vector<AxisSharding>& ops, const MeshRef& mesh,
                              const std::vector<bool>& open);
  ControlTyping (*typing)(RegionTyper& v, const Node& n, const std::vector<AxisSet>& in);
  // The op over P positions at once (one, outside shard_map bodies):
  // collectives in its regions meet across positions.
  PerDevice (*run)(const Node& n, const std::vector<const PerDevice*>& in, std::int64_t P, const RunGraph& run_graph);
};
// InternalError for an op that is not control flow.
const ControlRules& control_rules(Op op);

template <Op op>
struct ControlRule;  // defined for the control-flow ops only

#define TESSEL_CONTROL_RULE(OP)                                                                                  \
  template <>                                                                                                    \
  struct ControlRule<Op::OP> {                                                                                   \
    static RegionShardings boundary(const Node& n, const std::vector<AxisSharding>& ops, const MeshRef& mesh,     \
                                    const std::vector<bool>& open);                                              \
    static ControlTyping typing(RegionTyper& v, const Node& n, const std::vector<AxisSet>& in);                  \
    static PerDevice run(const Node& n, const std::vector<const PerDevice*>& in, std::int64_t P,                 \
                         const RunGraph& run_graph);                                                             \
  };
TESSEL_CONTROL_RULE(cond)
TESSEL_CONTROL_RULE(while_)
TESSEL_CONTROL_RULE(scan)
#undef TESSEL_CONTROL_RULE

}  // namespace tessel
