// The IR: one generic, hash-consed node type (tinygrad's UOp) over the closed
// primitive set of tracer/ops.hpp.
//
// A Node is immutable: a primitive, its operands, its abstract value (dtype,
// shape, weak type) and its parameters. Nodes are made only by the builders of
// tracer/build.hpp, which check shapes and dtypes where the node is built, so
// later passes trust the IR. Within one NodeTable equal nodes are one object:
// common subexpressions are shared by construction.
//
// A Graph is a function: parameters in, outputs out. Shapes in a traced graph
// are global; after partitioning (tracer/partition.hpp) they are per-device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracer/attrs.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/key.hpp"
#include "tracer/ops.hpp"
#include "tessel/core/shape.hpp"
#include "tracer/sharding.hpp"

namespace tessel {

// An abstract value: what is known of an array at trace time, or of a
// tuple of arrays (the value of a node with several results, XLA's tuple:
// get_tuple_element projects one; dtype and shape are then unused).
struct Aval {
  DType dtype = DType::float32;
  Shape shape;
  bool weak_type = false;
  bool tuple = false;
  std::vector<Aval> elements;  // a tuple's
  bool operator==(const Aval&) const = default;
  std::string str() const;  // "f32[4,8]" ("f32[]{weak}" when weak; "(f32[2], s32[])" for a tuple)
  static Aval make_tuple(std::vector<Aval> elements);
};

struct Node;
using NodeRef = std::shared_ptr<const Node>;

struct Node {
  Op op;
  std::vector<NodeRef> in;
  Aval aval;
  Attrs attrs;  // the struct its op names (tracer/attrs.hpp)
  std::size_t hash = 0;
  int id = 0;  // creation order within its table: stable printing

  const Shape& shape() const { return aval.shape; }
  // The attribute struct of this node's op.
  template <class A>
  const A& attr() const {
    return attrs.as<A>();
  }
  // Its child graphs (call bodies; later loop bodies, branches).
  std::vector<GraphRef> regions() const { return attrs.regions(); }
  DType dtype() const { return aval.dtype; }
  // Frees chains of operands iteratively: a 100,000-node chain must not
  // destroy itself recursively (stack overflow).
  ~Node();
  int rank() const { return int(aval.shape.size()); }
};

// Interns nodes: make() returns the existing node when an equal one exists.
class NodeTable {
 public:
  NodeRef make(Op op, std::vector<NodeRef> in, Aval aval, Attrs attrs);
  int size() const { return next_id_; }

 private:
  struct Key {
    const Node* n;
  };
  std::unordered_multimap<std::size_t, NodeRef> table_;
  int next_id_ = 0;
};

struct Graph {
  std::string name = "f";
  std::vector<NodeRef> params;   // parameter nodes, by index
  std::vector<NodeRef> outputs;  // results, in order
  // Nodes kept for their side effects though no output uses them
  // (debug_callback: ts::debug::print and callback), in trace order. A pass
  // that rebuilds a graph maps them as it maps the outputs.
  std::vector<NodeRef> effects;

  // Every node reachable from the outputs and the effects (and every
  // parameter), operands first.
  std::vector<NodeRef> topo_order() const;
};

// The number each value gets in to_text (%0, %1, ...): its position in topo_order.
std::unordered_map<const Node*, int> value_numbers(const Graph& g);

// Calls every graph of g's region tree, g first, then each node's regions
// (depth first, in node order): passes that look at every node of a program
// walk it with this, so they never miss a region.
void for_each_graph(const Graph& g, const std::function<void(const Graph&)>& fn);

// HLO-like text of a graph; `shardings` (optional, by node) are printed after
// each value, then `notes` (optional, by node) as comments.
std::string to_text(const Graph& g, const std::unordered_map<const Node*, AxisSharding>* shardings = nullptr,
                    const std::unordered_map<const Node*, std::string>* notes = nullptr);

// Exact structural keys (tessel/core/key.hpp): every node's op, aval and every
// parameter bit (constants' bytes, shardings, meshes), operands by position.
// Equal keys mean the same program, so caches key on them, never on text.
Key fingerprint(const Graph& g);
// The subgraph computing `root`, with the nodes of `leaves` as numbered
// inputs (leaves[i] is input i, keyed by its aval only).
Key fingerprint(const NodeRef& root, const std::vector<NodeRef>& leaves);

// Checks the invariants the builders establish (operand avals against each
// op's rule); throws InternalError naming the node. Run between passes in
// debug builds and by the tests.
void verify(const Graph& g);

}  // namespace tessel
