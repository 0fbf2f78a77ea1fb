#include "tracer/vma.hpp"

#include <algorithm>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/control_rules.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

// ppermute moves data along the axes where sources and targets differ.
std::vector<int> permute_axes(const Node& n, const DeviceMesh& mesh) {
  AxisSet s;
  for (auto [src, dst] : n.attr<attr::CollectivePermute>().pairs)
    for (int d = 0; d < mesh.num_axes(); ++d)
      if (mesh.coord(src, d) != mesh.coord(dst, d)) s.insert(d);
  return std::vector<int>(s.begin(), s.end());
}

namespace {

// The vma of n's result from its operands' (already pvary'd where needed).
AxisSet result_vma(const Node& n, const std::vector<const AxisSet*>& in, const DeviceMesh& mesh) {
  AxisSet s;
  if (n.op == Op::remat_barrier) return *in[0];  // it only waits for its second operand
  for (auto* v : in) s.insert(v->begin(), v->end());
  if (n.op == Op::collective_permute) {
    for (int a : permute_axes(n, mesh)) s.insert(a);
    return s;
  }
  const std::vector<int>* axes = collective_axes(n).axes;
  if (!axes) return s;
  if (n.op == Op::all_reduce) {
    for (int a : *axes) s.erase(a);
  } else {
    s.insert(axes->begin(), axes->end());  // all_gather, psum_scatter, all_to_all, pvary, axis_index
  }
  return s;
}

}  // namespace

AxisSet spec_axes(const AxisSharding& s) {
  AxisSet a;
  for (auto& d : s.dims) a.insert(d.begin(), d.end());
  return a;
}

namespace {

// Per node, the vma of each element (one for an array value).
using Vmas = std::unordered_map<const Node*, std::vector<AxisSet>>;

// A nested shard_map's parameters (results): split by their in_specs
// (out_specs) over its own manual axes, and varying over the enclosing ones
// as their operands (the body's outputs) do.
std::vector<AxisSet> joined(const std::vector<AxisSharding>& specs, const std::vector<int>& manual,
                            const std::vector<const AxisSet*>& values) {
  std::vector<AxisSet> r;
  for (size_t k = 0; k < values.size(); ++k) {
    AxisSet s = spec_axes(specs.at(k));
    for (int a : *values[k])
      if (std::find(manual.begin(), manual.end(), a) == manual.end()) s.insert(a);
    r.push_back(std::move(s));
  }
  return r;
}
std::vector<AxisSet> inner_params(const attr::ShardMap& sm, const std::vector<const AxisSet*>& operands) {
  return joined(sm.in_specs, sm.manual, operands);
}
std::vector<AxisSet> inner_results(const attr::ShardMap& sm, const std::vector<const AxisSet*>& outputs) {
  return joined(sm.out_specs, sm.manual, outputs);
}

void type_graph(const Graph& g, const std::vector<AxisSet>& params, const DeviceMesh& mesh, Vmas& v);

// Set while typing the body of a shard_map that leaves mesh axes automatic:
// partitioning its regions may add collectives over those axes later.
thread_local bool t_automatic_axes = false;

// The typing of a control-flow op (cond, while_, scan) is its rule
// (ControlRule<op>::typing); this is what the rule may use.
class Typer final : public RegionTyper {
 public:
  explicit Typer(const DeviceMesh& mesh) : mesh_(mesh) {}
  const DeviceMesh& mesh() const override { return mesh_; }
  std::vector<AxisSet> outputs_of(const Graph& g, const std::vector<AxisSet>& params) override {
    Vmas v;
    type_graph(g, params, mesh_, v);
    std::vector<AxisSet> out;
    for (auto& o : g.outputs) out.push_back(v.at(o.get()).at(0));
    return out;
  }
  void no_collectives(const Node& n, const AxisSet& control, const char* what,
                      const std::vector<GraphRef>& regions) override {
    if (control.empty()) return;
    const DeviceMesh& mesh = mesh_;
    if (t_automatic_axes)
      throw NotImplementedError(std::string(op_name(n.op)) + " in the body of a shard_map that leaves mesh axes automatic, whose " +
                                what + " varies over mesh axis '" + mesh.axes()[size_t(*control.begin())].name +
                                "': partitioning its regions over the automatic axes may need collectives, which devices "
                                "taking different paths would never meet (make every axis manual, or the " + what +
                                " invariant)");
    for (auto& r : regions)
      if (has_collectives(*r))
        throw NotImplementedError(std::string(op_name(n.op)) + " in a shard_map body whose " + what + " varies over mesh axis '" +
                                  mesh.axes()[size_t(*control.begin())].name +
                                  "' while its regions hold collectives: devices would run different code and never meet");
  }

 private:
  const DeviceMesh& mesh_;
};

ControlTyping type_control(const Node& n, const std::vector<AxisSet>& in, const DeviceMesh& mesh) {
  Typer typer(mesh);
  return control_rules(n.op).typing(typer, n, in);
}

// The vma of every value of g (nested shard_map bodies too).
void type_graph(const Graph& g, const std::vector<AxisSet>& params, const DeviceMesh& mesh, Vmas& v) {
  for (size_t k = 0; k < g.params.size(); ++k) v[g.params[k].get()] = {params.at(k)};
  for (auto& n : g.topo_order()) {
    if (n->op == Op::parameter) continue;
    std::vector<const AxisSet*> in;
    for (auto& x : n->in) in.push_back(&v.at(x.get()).at(0));
    if (n->op == Op::shard_map) {
      const auto& sm = n->attr<attr::ShardMap>();
      type_graph(*sm.body, inner_params(sm, in), mesh, v);
      std::vector<const AxisSet*> outs;
      for (auto& o : sm.body->outputs) outs.push_back(&v.at(o.get()).at(0));
      v[n.get()] = inner_results(sm, outs);
    } else if (n->op == Op::tuple) {
      std::vector<AxisSet> e;
      for (auto* x : in) e.push_back(*x);
      v[n.get()] = std::move(e);
    } else if (n->op == Op::get_tuple_element) {
      v[n.get()] = {v.at(n->in[0].get()).at(size_t(n->attr<attr::TupleIndex>().index))};
    } else if (is_control_flow(n->op)) {
      std::vector<AxisSet> ins;
      for (auto* x : in) ins.push_back(*x);
      ControlTyping ct = type_control(*n, ins, mesh);
      auto regions = n->regions();
      for (size_t r = 0; r < regions.size(); ++r) type_graph(*regions[r], ct.params[r], mesh, v);
      v[n.get()] = ct.results;
    } else if (op_family(n->op) == OpFamily::Region && !is_custom_call(n->op)) {
      throw NotImplementedError(std::string(op_name(n->op)) + " inside a shard_map body");
    } else if (n->aval.tuple) {
      // lu, qr, ...: every element varies as the operands do.
      v[n.get()] = std::vector<AxisSet>(n->aval.elements.size(), result_vma(*n, in, mesh));
    } else {
      v[n.get()] = {result_vma(*n, in, mesh)};
    }
  }
}

}  // namespace

std::unordered_map<const Node*, AxisSet> varying_axes(const Graph& body, const std::vector<AxisSet>& params,
                                                      const DeviceMesh& mesh, bool automatic_axes) {
  struct Scope {
    bool saved = t_automatic_axes;
    explicit Scope(bool a) { t_automatic_axes = t_automatic_axes || a; }
    ~Scope() { t_automatic_axes = saved; }
  } scope(automatic_axes);
  Vmas v;
  type_graph(body, params, mesh, v);
  std::unordered_map<const Node*, AxisSet> out;
  for (auto& [n, e] : v) {
    AxisSet all;  // a tuple: the union of its elements'
    for (auto& s : e) all.insert(s.begin(), s.end());
    out[n] = std::move(all);
  }
  return out;
}

Graph with_explicit_pvary(const Graph& body, const std::vector<AxisSet>& params, const std::vector<AxisSet>& outs,
                          const MeshRef& mesh) {
  NodeTable t;
  Graph g;
  g.name = body.name;
  Vmas v;  // by new node
  for (size_t k = 0; k < body.params.size(); ++k) {
    g.params.push_back(build::parameter(t, int(k), body.params[k]->aval));
    v[g.params.back().get()] = {params.at(k)};
  }
  auto raise = [&](NodeRef x, const AxisSet& want) {
    std::vector<int> missing;
    for (int a : want)
      if (!v.at(x.get()).at(0).count(a)) missing.push_back(a);
    if (missing.empty()) return x;
    NodeRef y = build::pvary(t, x, mesh, missing);
    AxisSet s = v.at(x.get()).at(0);
    s.insert(missing.begin(), missing.end());
    v[y.get()] = {s};
    return y;
  };
  // Regions are typed here, with their parameters' vma (not by rewrite's recursion).
  auto m = rewrite(
      body, t, g.params,
      [&](const Node& n, const std::vector<NodeRef>& ops) -> NodeRef {
        std::vector<NodeRef> in = ops;
        std::vector<const AxisSet*> vin;
        if (n.op == Op::shard_map) {
          // A nested shard_map: its body made explicit with its parameters'
          // full typing, so that its own transpose takes it as it is.
          for (auto& x : in) vin.push_back(&v.at(x.get()).at(0));
          attr::ShardMap sm = n.attr<attr::ShardMap>();
          const auto pv = inner_params(sm, vin);
          std::vector<AxisSet> named;
          for (auto& s : sm.out_specs) named.push_back(spec_axes(s));
          auto typed = std::make_shared<Graph>(with_explicit_pvary(*sm.body, pv, named, mesh));
          const auto tv = varying_axes(*typed, pv, *mesh);
          std::vector<const AxisSet*> vout;
          for (auto& o : typed->outputs) vout.push_back(&tv.at(o.get()));
          sm.body = typed;
          sm.explicit_vma = true;
          NodeRef y = build::shard_map(t, std::move(sm), in);
          v[y.get()] = inner_results(y->attr<attr::ShardMap>(), vout);
          return y;
        }
        if (is_control_flow(n.op)) {
          // Each region made explicit with its parameters' typing, its
          // outputs raised to the op's; a loop's init raised to its carries'.
          std::vector<AxisSet> ins;
          for (auto& x : in) ins.push_back(v.at(x.get()).at(0));
          ControlTyping ct = type_control(n, ins, *mesh);
          auto regions = n.regions();
          std::vector<GraphRef> typed;
          for (size_t r = 0; r < regions.size(); ++r)
            typed.push_back(std::make_shared<Graph>(with_explicit_pvary(*regions[r], ct.params[r], ct.outputs[r], mesh)));
          size_t first_carry = 0, carries = 0;
          if (n.op == Op::while_) {
            first_carry = size_t(n.attr<attr::While>().cond_consts + n.attr<attr::While>().body_consts);
            carries = in.size() - first_carry;
          } else if (n.op == Op::scan) {
            first_carry = size_t(n.attr<attr::Scan>().consts);
            carries = size_t(n.attr<attr::Scan>().carries);
          }
          for (size_t k = 0; k < carries; ++k) in[first_carry + k] = raise(in[first_carry + k], ct.results[k]);
          NodeRef y = with_regions(t, n, typed, in);
          v[y.get()] = ct.results;
          return y;
        }
        // A custom call types as one op (its results vary as its operands):
        // autodiff then applies its rule inside the body.
        if (op_family(n.op) == OpFamily::Region && !is_custom_call(n.op))
          throw NotImplementedError(std::string(op_name(n.op)) + " inside a shard_map body");
        if (n.op == Op::tuple || n.op == Op::get_tuple_element) {
          NodeRef y = build::with_operands(t, n, in);
          if (!v.count(y.get())) {
            if (n.op == Op::tuple) {
              std::vector<AxisSet> e;
              for (auto& x : in) e.push_back(v.at(x.get()).at(0));
              v[y.get()] = std::move(e);
            } else {
              v[y.get()] = {v.at(in[0].get()).at(size_t(n.attr<attr::TupleIndex>().index))};
            }
          }
          return y;
        }
        if (const std::vector<int>* axes = collective_axes(n).axes; axes && n.op != Op::axis_index && n.op != Op::pvary) {
          in[0] = raise(in[0], AxisSet(axes->begin(), axes->end()));  // JAX's insert_collective_pvary
        } else if (in.size() > 1 && n.op != Op::remat_barrier) {
          AxisSet all;
          for (auto& x : in) all.insert(v.at(x.get()).at(0).begin(), v.at(x.get()).at(0).end());
          for (auto& x : in) x = raise(x, all);  // JAX's auto_insert_reshard
        }
        NodeRef y = build::with_operands(t, n, in);
        if (!v.count(y.get())) {
          for (auto& x : in) vin.push_back(&v.at(x.get()).at(0));
          // A tuple-valued op (lu, qr, ...): each element as its operands.
          v[y.get()] = std::vector<AxisSet>(y->aval.tuple ? y->aval.elements.size() : 1, result_vma(*y, vin, *mesh));
        }
        return y;
      },
      /*into_regions=*/false);
  for (size_t k = 0; k < body.outputs.size(); ++k) g.outputs.push_back(raise(m.at(body.outputs[k].get()), outs.at(k)));
  for (auto& e : body.effects) g.effects.push_back(m.at(e.get()));
  return g;
}

Graph with_untyped_psums(const Graph& body) {
  NodeTable u;
  Graph g;
  g.name = body.name;
  for (size_t k = 0; k < body.params.size(); ++k) g.params.push_back(build::parameter(u, int(k), body.params[k]->aval));
  auto m = rewrite(
      body, u, g.params,
      [&](const Node& x, const std::vector<NodeRef>& in) -> NodeRef {
        if (is_control_flow(x.op)) {
          // Psums in loops and branches follow the rule too.
          std::vector<GraphRef> regions;
          for (auto& r : x.regions()) regions.push_back(std::make_shared<Graph>(with_untyped_psums(*r)));
          return with_regions(u, x, regions, in);
        }
        if (x.op != Op::all_reduce || x.attr<attr::AllReduce>().reduce_op != Op::add) return build::with_operands(u, x, in);
        const auto& a = x.attr<attr::AllReduce>();
        return build::all_reduce(u, build::pvary(u, in[0], a.mesh, a.axes), a.mesh, a.axes, Op::add);
      },
      /*into_regions=*/false);
  for (auto& o : body.outputs) g.outputs.push_back(m.at(o.get()));
  for (auto& e : body.effects) g.effects.push_back(m.at(e.get()));
  return g;
}

}  // namespace tessel
