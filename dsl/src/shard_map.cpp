#include <tessel/shard_map.hpp>

#include <tessel/creation.hpp>
#include <tessel/ops.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"
#include "tracer/vma.hpp"

namespace tessel {

using detail::cat;

namespace detail {
namespace {

// The shard_maps being traced on this thread, innermost last: what binds
// axis names for the collectives.
struct ManualContext {
  MeshRef mesh;
  std::vector<int> manual;  // mesh axes the body sees
  std::shared_ptr<TraceState> trace;  // the body's trace
  std::vector<AxisSet> param_vma;     // the axes each of its explicit inputs varies over
  bool check_vma = true;
};
thread_local std::vector<ManualContext> t_manual;

struct ManualScope {
  explicit ManualScope(ManualContext c) { t_manual.push_back(std::move(c)); }
  ~ManualScope() { t_manual.pop_back(); }
};

struct Bound {
  MeshRef mesh;
  std::vector<int> axes;
  std::int64_t size = 1;
};

std::string names_str(const std::vector<std::string>& names) {
  std::ostringstream os;
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << '\'' << names[i] << '\'';
  return os.str();
}

// The mesh axes of `names` in the innermost shard_map binding all of them.
Bound bind(const AxisName& names, const char* what) {
  if (names.names().empty()) throw ValueError(cat(what, ": no axis name given"));
  for (auto it = t_manual.rbegin(); it != t_manual.rend(); ++it) {
    Bound b{it->mesh, {}, 1};
    for (auto& n : names.names()) {
      const int a = it->mesh->axis_index(n);
      if (a < 0 || std::find(it->manual.begin(), it->manual.end(), a) == it->manual.end()) break;
      if (std::find(b.axes.begin(), b.axes.end(), a) != b.axes.end())
        throw ValueError(cat(what, ": axis name '", n, "' given twice"));
      b.axes.push_back(a);
      b.size *= it->mesh->axes()[a].size;
    }
    if (b.axes.size() == names.names().size()) return b;
  }
  std::vector<std::string> bound;
  for (auto& c : t_manual)
    for (int a : c.manual) bound.push_back(c.mesh->axes()[a].name);
  throw NameError(cat("unbound axis name: ", names_str(names.names()), " in ", what,
                      ". Axis names are bound by an enclosing shard_map; bound here: [", names_str(bound), "]"));
}

// x inside the trace being built (a concrete array is captured).
Array traced(const Array& x) {
  if (impl_of(x).trace) return x;
  auto t = current_trace();
  if (!t) throw InternalError("a collective outside any trace");
  return lift(t, x);
}

int norm_axis(int axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank) throw ShapeError(cat(what, ": axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// The axes x varies over in the innermost body being traced: a tracer of
// that body's trace by its ancestry (its explicit inputs vary as their
// in_specs and enclosing shard_maps say; captured arrays and constants do
// not); anything else (concrete) varies over none. nullopt: a tracer of
// another trace (a jit inside the body), whose typing is not known here.
std::optional<AxisSet> vma_in_body(const Array& x) {
  if (t_manual.empty()) return AxisSet{};
  const ManualContext& c = t_manual.back();
  const auto& impl = impl_of(x);
  if (!impl.trace) return AxisSet{};
  if (impl.trace != c.trace) return std::nullopt;
  Graph g;
  g.params = c.trace->params;
  g.outputs = {impl.node};
  std::vector<AxisSet> pv(g.params.size());
  for (size_t k = 0; k < c.param_vma.size() && k < pv.size(); ++k) pv[k] = c.param_vma[k];
  return varying_axes(g, pv, *c.mesh).at(impl.node.get());
}

}  // namespace

Graph typed_for_vjp(const Graph& g, const std::vector<Array>& inputs) {
  if (t_manual.empty()) return g;
  std::vector<AxisSet> pv;
  for (auto& x : inputs) {
    auto v = vma_in_body(x);
    if (!v) {
      for (auto& n : g.topo_order())
        if (collective_axes(*n).mesh)
          throw NotImplementedError("the gradient of a function with collectives, taken on values of a jit traced "
                                    "inside a shard_map body (take it in the body itself)");
      return g;
    }
    pv.push_back(*v);
  }
  if (!t_manual.back().check_vma) return with_untyped_psums(g);
  return with_explicit_pvary(g, pv, std::vector<AxisSet>(g.outputs.size()), t_manual.back().mesh);
}

void check_constraint_in_body(const AxisSharding& s) {
  if (t_manual.empty()) return;
  const ManualContext& c = t_manual.back();
  if (!(*s.mesh == *c.mesh))
    throw ShardingError(cat("with_sharding_constraint over ", s.mesh->str(), " inside the body of a shard_map over ",
                            c.mesh->str()));
  for (auto& d : s.dims)
    for (int a : d)
      if (std::find(c.manual.begin(), c.manual.end(), a) != c.manual.end())
        throw ShardingError(cat("with_sharding_constraint with ", s.spec_str(), " inside a shard_map body: mesh axis '",
                                c.mesh->axes()[size_t(a)].name,
                                "' is manual there; a constraint may name only the axes the shard_map left automatic"));
}

std::vector<Array> shard_map_call(const std::string& name, const Mesh& mesh, const Specs& in_specs,
                                  const Specs& out_specs, const ShardMapOptions& opt, const std::vector<Array>& args,
                                  const std::vector<int>& arg_of_leaf, std::size_t nargs,
                                  const std::function<std::vector<Array>(const std::vector<Array>&)>& body) {
  const MeshRef& m = mesh.impl();
  const bool check_vma = opt.check_rep ? *opt.check_rep : opt.check_vma;
  // Axes already manual: those of the enclosing shard_maps (nested ones run
  // over the same mesh, on the axes the enclosing ones left automatic).
  std::vector<int> enclosing;
  if (!t_manual.empty()) {
    const ManualContext& outer = t_manual.back();
    if (!(*outer.mesh == *m))
      throw ValueError(cat("shard_map over ", m->str(), " inside the body of a shard_map over ", outer.mesh->str(),
                           ": a nested shard_map runs over the same mesh"));
    enclosing = outer.manual;
  }
  auto is_enclosing = [&](int a) { return std::find(enclosing.begin(), enclosing.end(), a) != enclosing.end(); };
  std::vector<int> manual;  // this shard_map's manual axes
  if (opt.axis_names.empty()) {
    for (int a = 0; a < m->num_axes(); ++a)
      if (!is_enclosing(a)) manual.push_back(a);
    if (manual.empty())
      throw ValueError(cat("shard_map inside the body of a shard_map that is manual over every axis of ", m->str(),
                           ": no axis is left for it (give the outer one axis_names)"));
  } else {
    for (auto& n : opt.axis_names) {
      const int a = m->axis_index(n);
      if (a < 0) throw ValueError(cat("shard_map: axis_names contains '", n, "', which is not an axis of ", m->str()));
      if (is_enclosing(a))
        throw ValueError(cat("shard_map: axis_names contains '", n,
                             "', which an enclosing shard_map already made manual"));
      manual.push_back(a);
    }
    std::sort(manual.begin(), manual.end());
    manual.erase(std::unique(manual.begin(), manual.end()), manual.end());
  }
  auto is_manual = [&](int a) { return std::find(manual.begin(), manual.end(), a) != manual.end(); };
  // A spec names manual axes only: the others are automatic inside the body.
  auto check_spec = [&](const AxisSharding& s, const char* which, size_t k) {
    for (auto& d : s.dims)
      for (int a : d)
        if (!is_manual(a)) {
          std::vector<std::string> names;
          for (int x : manual) names.push_back(m->axes()[size_t(x)].name);
          throw ValueError(cat("shard_map applied to the function '", name, "': ", which, "[", k, "] is ", s.spec_str(),
                               ", which refers to mesh axis '", m->axes()[size_t(a)].name,
                               "', but the shard_map is manual only over (", names_str(names),
                               "); an axis outside axis_names stays automatic and cannot appear in a spec"));
        }
  };
  std::vector<int> bound = enclosing;  // what the body's collectives may name
  bound.insert(bound.end(), manual.begin(), manual.end());
  std::sort(bound.begin(), bound.end());
  const bool all_manual = int(bound.size()) == m->num_axes();
  // The in_spec of each array.
  if (!in_specs.single() && in_specs.specs().size() != nargs)
    throw ValueError(cat("shard_map: in_specs has ", in_specs.specs().size(), " entries but the function was called with ",
                         nargs, " positional arguments (give one spec per argument, or one for all)"));
  std::vector<AxisSharding> in_ax;
  std::vector<Aval> blocks;
  for (size_t k = 0; k < args.size(); ++k) {
    const PartitionSpec& spec = in_specs.single() ? in_specs.specs()[0] : in_specs.specs()[size_t(arg_of_leaf[k])];
    const Shape& shape = args[k].shape();
    AxisSharding s = axis_sharding_for_rank(NamedSharding(mesh, spec), int(shape.size()));
    check_spec(s, "in_specs", in_specs.single() ? 0 : size_t(arg_of_leaf[k]));
    Aval b{args[k].dtype(), shape, args[k].weak_type()};
    for (int d = 0; d < s.rank(); ++d) {
      const std::int64_t tiles = s.num_tiles(d);
      if (shape[d] % tiles != 0) {
        std::vector<std::string> axes;
        for (int a : s.dims[d]) axes.push_back(m->axes()[a].name);
        throw ShardingError(cat("shard_map applied to the function '", name,
                                "' was given argument arrays with axis sizes that are not evenly divisible by the "
                                "corresponding mesh axis sizes: args[",
                                k, "] of shape ", aval_str(args[k].dtype(), shape), " corresponds to in_specs[",
                                in_specs.single() ? 0 : arg_of_leaf[k], "] of value ", s.spec_str(),
                                ", which maps array axis ", d, " (of size ", shape[d], ") to mesh axes (",
                                names_str(axes), ") (of total size ", tiles, ")"));
      }
      b.shape[d] = shape[d] / tiles;
    }
    in_ax.push_back(s);
    blocks.push_back(b);
  }
  // What each block varies over: its in_spec's axes, and the enclosing
  // axes its array varies over.
  std::vector<AxisSet> param_vma;
  for (size_t k = 0; k < args.size(); ++k) {
    AxisSet v = spec_axes(in_ax[k]);
    if (auto outer = vma_in_body(args[k]))
      for (int a : *outer)
        if (!is_manual(a)) v.insert(a);
    param_vma.push_back(std::move(v));
  }
  // Trace the body on blocks.
  TracedGraph tg = trace_graph(name, blocks, [&](const std::vector<Array>& tracers) {
    ManualScope scope({m, bound, current_trace(), param_vma, check_vma});
    return body(tracers);
  });
  const std::vector<NodeRef>& outs = tg.g.outputs;
  // Arrays the body closed over: extra inputs, the same on every device.
  std::vector<Array> all_args = args;
  for (auto& c : tg.trace->captured) {
    all_args.push_back(c);
    in_ax.push_back(replicated(m, int(c.shape().size())));
  }
  auto g = std::make_shared<Graph>(tg.g);
  // The out_spec of each result.
  if (!out_specs.single() && out_specs.specs().size() != outs.size())
    throw ValueError(cat("shard_map: out_specs has ", out_specs.specs().size(), " entries but the function returns ",
                         outs.size(), " arrays (give one spec per result array, or one for all)"));
  std::vector<AxisSharding> out_ax;
  for (size_t k = 0; k < outs.size(); ++k) {
    const PartitionSpec& spec = out_specs.single() ? out_specs.specs()[0] : out_specs.specs()[k];
    out_ax.push_back(axis_sharding_for_rank(NamedSharding(mesh, spec), outs[k]->rank()));
    check_spec(out_ax.back(), "out_specs", k);
  }
  // The typing runs either way: it also rejects control flow whose devices
  // would take different paths through collectives.
  std::vector<AxisSet> pv;
  for (auto& s : in_ax) pv.push_back(spec_axes(s));
  const auto vma = varying_axes(*g, pv, *m, !all_manual);
  if (check_vma) {
    for (size_t k = 0; k < outs.size(); ++k) {
      std::set<int> used;
      for (auto& d : out_ax[k].dims) used.insert(d.begin(), d.end());
      std::vector<std::string> unproven;
      for (int a : vma.at(outs[k].get()))
        if (is_manual(a) && !used.count(a)) unproven.push_back(m->axes()[a].name);
      if (!unproven.empty()) {
        std::vector<std::string> names;
        for (auto& a : m->axes()) names.push_back(a.name);
        throw ShardingError(cat(
            "shard_map applied to the function '", name,
            "' was given out_specs which require replication which can't be statically inferred given the mesh:\n\n"
            "The mesh given has axis names (",
            names_str(names), ") (", m->str(), ").\n\nout_specs[", k, "] is ", out_ax[k].spec_str(),
            " which implies that the corresponding output value (", outs[k]->aval.str(),
            ") is replicated across mesh axes (", names_str(unproven),
            "), but the value varies over them.\n\nCheck if these output values are meant to be replicated over "
            "those mesh axes. If not, consider revising the corresponding out_specs entries. If so, consider "
            "disabling the check with check_vma=false."));
      }
    }
  }
  attr::ShardMap sm;
  sm.body = g;
  sm.mesh = m;
  sm.in_specs = in_ax;
  sm.out_specs = out_ax;
  sm.manual = manual;
  sm.check_vma = check_vma;
  return apply_region(name, all_args, any_effects({sm.body}), [&](NodeTable& tab, const std::vector<NodeRef>& in) {
    // The operands, as the in_specs lay them out (what propagation sees),
    // when no axis stays automatic; otherwise propagation leaves their
    // automatic axes open and the partitioner joins the two.
    std::vector<NodeRef> ops = in;
    if (all_manual)
      for (size_t k = 0; k < in.size(); ++k) ops[k] = build::sharding_constraint(tab, in[k], sm.in_specs[k]);
    return build::shard_map(tab, sm, ops);
  });
}

}  // namespace detail

// ---------------------------------------------------------------- collectives

namespace {
Array all_reduce(const char* what, const Array& x, const AxisName& axes, Op op) {
  auto b = detail::bind(axes, what);
  return detail::apply1(what, {detail::traced(x)}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    return build::all_reduce(t, in[0], b.mesh, b.axes, op);
  });
}
}  // namespace

Array psum(const Array& x, const AxisName& axes) {
  if (x.dtype() == DType::bool_) throw TypeError("psum of a boolean array; convert it first");
  return all_reduce("psum", x, axes, Op::add);
}
Array pmax(const Array& x, const AxisName& axes) { return all_reduce("pmax", x, axes, Op::max); }
Array pmin(const Array& x, const AxisName& axes) { return all_reduce("pmin", x, axes, Op::min); }
Array pmean(const Array& x, const AxisName& axes) {
  const int n = axis_size(axes);
  Array s = psum(x, axes);
  if (is_integral(x.dtype()) || x.dtype() == DType::bool_) s = s.astype(DType::float32);
  return s / double(n);
}

int axis_size(const AxisName& axis_name) { return int(detail::bind(axis_name, "axis_size").size); }

Array axis_index(const AxisName& axis_name) {
  auto b = detail::bind(axis_name, "axis_index");
  auto t = detail::current_trace();
  if (!t) throw InternalError("axis_index outside any trace");
  return detail::tracer_for(t, build::axis_index(t->table, b.mesh, b.axes));
}

Array all_gather(const Array& x, const AxisName& axis_name, AllGatherOptions opt) {
  auto b = detail::bind(axis_name, "all_gather");
  Array xt = detail::traced(x);
  const int rank = xt.ndim();
  if (opt.tiled) {
    const int axis = detail::norm_axis(opt.axis, rank, "all_gather");
    return detail::apply1("all_gather", {xt}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
      return build::all_gather(t, in[0], b.mesh, b.axes, axis);
    });
  }
  // Stacked: a new dimension of the axis size at `axis`.
  const int axis = detail::norm_axis(opt.axis, rank + 1, "all_gather");
  Shape s = xt.shape();
  s.insert(s.begin() + axis, 1);
  return detail::apply1("all_gather", {xt}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    return build::all_gather(t, build::reshape(t, in[0], s), b.mesh, b.axes, axis);
  });
}

Array psum_scatter(const Array& x, const AxisName& axis_name, PsumScatterOptions opt) {
  auto b = detail::bind(axis_name, "psum_scatter");
  Array xt = detail::traced(x);
  const int rank = xt.ndim();
  const int d = detail::norm_axis(opt.scatter_dimension, rank, "psum_scatter");
  const std::int64_t len = xt.shape()[d];
  if (opt.tiled ? len % b.size != 0 : len != b.size)
    throw ShapeError(cat("psum_scatter: dimension ", d, " of ", aval_str(xt.dtype(), xt.shape()),
                         opt.tiled ? " must be divisible by " : " must equal ", "the axis size ", b.size));
  return detail::apply1("psum_scatter", {xt}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    NodeRef r = build::reduce_scatter(t, in[0], b.mesh, b.axes, d, Op::add);
    if (opt.tiled) return r;
    Shape s = r->shape();
    s.erase(s.begin() + d);
    return build::reshape(t, r, s);
  });
}

Array ppermute(const Array& x, const AxisName& axis_name, const std::vector<std::pair<int, int>>& perm) {
  auto b = detail::bind(axis_name, "ppermute");
  std::set<int> srcs, dsts;
  for (auto [s, d] : perm) {
    if (s < 0 || s >= b.size || d < 0 || d >= b.size)
      throw ValueError(cat("ppermute: pair (", s, ", ", d, ") is outside the axis of size ", b.size));
    if (!srcs.insert(s).second || !dsts.insert(d).second)
      throw ValueError(cat("ppermute: perm sends from or to index ", (srcs.count(s) ? s : d),
                           " twice; it must be a permutation (possibly partial)"));
  }
  // Pairs along the axis, in every group: positions in the whole mesh.
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  for (auto& group : collective_groups(*b.mesh, b.axes))
    for (auto [s, d] : perm) pairs.push_back({group[size_t(s)], group[size_t(d)]});
  return detail::apply1("ppermute", {detail::traced(x)}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    return build::collective_permute(t, in[0], b.mesh, pairs);
  });
}

Array all_to_all(const Array& x, const AxisName& axis_name, int split_axis, int concat_axis, AllToAllOptions opt) {
  auto b = detail::bind(axis_name, "all_to_all");
  Array xt = detail::traced(x);
  const int rank = xt.ndim();
  const int split = detail::norm_axis(split_axis, rank, "all_to_all");
  const int concat = detail::norm_axis(concat_axis, rank, "all_to_all");
  const std::int64_t len = xt.shape()[split];
  if (opt.tiled ? len % b.size != 0 : len != b.size)
    throw ShapeError(cat("all_to_all: split axis ", split, " of ", aval_str(xt.dtype(), xt.shape()),
                         opt.tiled ? " must be divisible by " : " must equal ", "the axis size ", b.size));
  return detail::apply1("all_to_all", {xt}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    if (opt.tiled) return build::all_to_all(t, in[0], b.mesh, b.axes, split, concat);
    // JAX's untiled form: element k along the split axis goes to member k;
    // the result drops the split axis and stacks what each member sent
    // along a new axis at concat_axis (np.insert(np.delete(shape, split),
    // concat, n)).
    NodeRef y = build::all_to_all(t, in[0], b.mesh, b.axes, split, split);  // exchange along the split axis
    // y[k] along `split` came from member k; move that axis to concat_axis.
    std::vector<std::int64_t> perm;
    for (int i = 0; i < rank; ++i)
      if (i != split) perm.push_back(i);
    perm.insert(perm.begin() + concat, split);
    return build::transpose(t, y, perm);
  });
}

Array pvary(const Array& x, const AxisName& axis_name) {
  auto b = detail::bind(axis_name, "pvary");
  return detail::apply1("pvary", {detail::traced(x)}, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    return build::pvary(t, in[0], b.mesh, b.axes);
  });
}

Array pbroadcast(const Array& x, const AxisName& axis_name, int source) {
  auto b = detail::bind(axis_name, "pbroadcast");
  if (source < 0 || source >= b.size)
    throw ValueError(cat("pbroadcast: source ", source, " is outside the axis of size ", b.size));
  Array mine = where(axis_index(axis_name) == source, x, zeros_like(x));
  if (x.dtype() == DType::bool_) return psum(mine.astype(DType::int32), axis_name).astype(DType::bool_);
  return psum(mine, axis_name);
}

}  // namespace tessel
