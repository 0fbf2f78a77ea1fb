#include "tracer/partition.hpp"

#include <algorithm>
#include <cmath>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace {

struct Partitioner final : LocalBuilder {
  Partitioner(const Graph& g, const ShardingAssignment& a, MeshRef mesh, NodeTable& t, std::vector<int> manual)
      : g(g), a(a), mesh(std::move(mesh)), t(t), manual(std::move(manual)) {}
  const Graph& g;
  const ShardingAssignment& a;
  MeshRef mesh;
  NodeTable& t;
  std::vector<int> manual;  // axes enclosing shard_maps made manual (g is one's body)
  // Effects of shard_map bodies inlined into the graph being built (its
  // own effects are mapped by whoever builds it).
  std::vector<NodeRef> effects;
  std::unordered_map<const Node*, NodeRef> local;
  // Each shard_map's results, as the per-device program holds them: split by
  // its out_specs over its manual axes, then by its body's automatic splits.
  std::unordered_map<const Node*, std::vector<AxisSharding>> shard_map_out;
  std::unordered_map<const Node*, std::vector<AxisSharding>> element_natural;  // lu, qr, ...: each element's layout

  std::int64_t tiles(const std::vector<int>& axes) const override {
    std::int64_t k = 1;
    for (int x : axes) k *= mesh->axes()[x].size;
    return k;
  }

  // This device's tile index along `axes`, times `scale`, as an int32 scalar.
  NodeRef offset(const std::vector<int>& axes, std::int64_t scale) override {
    NodeRef i = build::axis_index(t, mesh, axes);
    return build::binary(t, Op::mul, i, build::scalar(t, DType::int32, double(scale)));
  }

  NodeRef zero_i32() { return build::scalar(t, DType::int32, 0); }

  // ---------------------------------------------------------------- resharding

  // x holds an array of global shape G laid out as `from`; returns it as `to`.
  NodeRef reshard(NodeRef x, const Shape& G, const AxisSharding& from, const AxisSharding& to) override {
    TESSEL_CHECK_INTERNAL(from.unreduced.empty() && to.unreduced.empty());
    if (from.dims == to.dims) return x;
    const int r = int(G.size());
    if (NodeRef y = try_all_to_all(x, G, from, to)) return y;
    std::vector<std::vector<int>> current(r);
    for (int d = 0; d < r; ++d) {
      const auto& F = from.dims[d];
      const auto& T = to.dims[d];
      if (F == T) {
        current[d] = F;
        continue;
      }
      size_t p = 0;
      while (p < F.size() && p < T.size() && F[p] == T[p]) ++p;
      const bool even = G[d] % tiles(F) == 0 && G[d] % tiles(T) == 0;
      // (Over axes of one device in all, a gather would only copy: none.)
      if (even) {
        const std::vector<int> gathered(F.begin() + std::ptrdiff_t(p), F.end());
        if (tiles(gathered) > 1) x = build::all_gather(t, x, mesh, gathered, d);
        current[d] = std::vector<int>(F.begin(), F.begin() + p);
      } else {
        // Uneven tiles do not nest: gather the whole dim and cut off the padding.
        if (tiles(F) > 1) {
          x = build::all_gather(t, x, mesh, F, d);
          std::vector<std::int64_t> lo(r, 0), hi = x->shape();
          hi[d] = G[d];
          x = build::slice(t, x, lo, hi);
        }
        current[d] = {};
      }
    }
    // Slice the axes `to` adds, all dims in one dynamic slice.
    std::vector<NodeRef> starts(r);
    std::vector<std::int64_t> slice_size(r, -1);
    for (int d = 0; d < r; ++d) {
      const auto& T = to.dims[d];
      const auto& C = current[d];
      starts[d] = zero_i32();
      if (C.size() == T.size()) continue;
      std::vector<int> S(T.begin() + C.size(), T.end());
      const std::int64_t c_t = ceil_div(G[d], tiles(T));
      if (x->shape()[d] < c_t * tiles(S)) {
        // Pad so every tile, the last ones too, lies inside the array.
        std::vector<std::int64_t> lo(r, 0), hi(r, 0);
        hi[d] = c_t * tiles(S) - x->shape()[d];
        x = build::pad(t, x, build::scalar(t, x->dtype(), 0), lo, hi);
      }
      starts[d] = offset(S, c_t);
      slice_size[d] = c_t;
    }
    Shape sizes = x->shape();
    bool any = false;
    for (int d = 0; d < r; ++d)
      if (slice_size[d] >= 0) sizes[d] = slice_size[d], any = true;
    if (!any) return x;
    // A tile of a broadcast along dims it broadcasts (new dims, or operand
    // dims of size 1) is the same broadcast at the tile's shape: no slice,
    // and no dependence on the device's index (so that devices holding the
    // same operands compute the same thing, and the runtime can see it; XLA's
    // simplifier makes the same rewrite). Only where no padding was added:
    // then x is still the broadcast.
    if (x->op == Op::broadcast_in_dim) {
      const auto& dims = x->attr<attr::Dimensions>().dims;
      const Shape& in = x->in[0]->shape();
      bool broadcast_only = true;
      for (size_t i = 0; i < dims.size(); ++i)
        if (slice_size[std::size_t(dims[i])] >= 0 && in[i] != 1) broadcast_only = false;
      if (broadcast_only) return build::broadcast_in_dim(t, x->in[0], sizes, dims);
    }
    return build::dynamic_slice(t, x, starts, sizes);
  }

  // Mesh axes moving from the minor end of one dim to the minor end of
  // another: a single all-to-all over them (uneven: see below).
  NodeRef try_all_to_all(NodeRef x, const Shape& G, const AxisSharding& from, const AxisSharding& to) {
    const int r = int(G.size());
    int src = -1, dst = -1;
    auto prefix = [](const std::vector<int>& a, const std::vector<int>& b) {  // a strictly begins b
      return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    for (int d = 0; d < r; ++d) {
      const auto& F = from.dims[d];
      const auto& T = to.dims[d];
      if (F == T) continue;
      if (prefix(T, F) && src < 0) src = d;
      else if (prefix(F, T) && dst < 0) dst = d;
      else return nullptr;
    }
    if (src < 0 || dst < 0) return nullptr;
    const std::vector<int> moved(from.dims[src].begin() + std::ptrdiff_t(to.dims[src].size()), from.dims[src].end());
    if (!std::equal(moved.begin(), moved.end(), to.dims[dst].begin() + std::ptrdiff_t(from.dims[dst].size()),
                    to.dims[dst].end()))
      return nullptr;
    bool even = true;
    for (int d : {src, dst})
      if (G[d] % tiles(from.dims[d]) != 0 || G[d] % tiles(to.dims[d]) != 0) even = false;
    if (even) return build::all_to_all(t, x, mesh, moved, dst, src);
    // Uneven: the k-way split of a dim's coarse tiles must be its fine tiles
    // (padding then ends the last tile, as every uneven split's does). It is
    // where the coarse layout is whole, or its tiles hold k fine tiles
    // exactly; else the tiles do not line up and the dim is gathered. Pad the
    // scattered dim's tile to k fine tiles, move, and cut the gathered dim's
    // padding where it becomes whole.
    const std::int64_t k = tiles(moved);
    auto nests = [&](int d, const std::vector<int>& coarse, const std::vector<int>& fine) {
      return tiles(coarse) == 1 || ceil_div(G[d], tiles(coarse)) == k * ceil_div(G[d], tiles(fine));
    };
    if (!nests(src, to.dims[src], from.dims[src]) || !nests(dst, from.dims[dst], to.dims[dst])) return nullptr;
    const std::int64_t c_dst = ceil_div(G[dst], tiles(to.dims[dst]));
    if (x->shape()[dst] < k * c_dst) {
      std::vector<std::int64_t> lo(r, 0), hi(r, 0);
      hi[dst] = k * c_dst - x->shape()[dst];
      x = build::pad(t, x, build::scalar(t, x->dtype(), 0), lo, hi);
    }
    x = build::all_to_all(t, x, mesh, moved, dst, src);
    const std::int64_t c_src = ceil_div(G[src], tiles(to.dims[src]));
    if (x->shape()[src] == c_src) return x;
    std::vector<std::int64_t> lo(r, 0), hi = x->shape();
    hi[src] = c_src;
    return build::slice(t, x, lo, hi);
  }

  // Replaces the padding of split, uneven dims `dims` of x (sharded as s) by `fill`.
  NodeRef mask(NodeRef x, const Shape& G, const AxisSharding& s, const std::vector<int>& dims,
               const Literal& fill) override {
    NodeRef valid;
    for (int d : dims) {
      if (s.dims[d].empty() || G[d] % tiles(s.dims[d]) == 0) continue;
      const std::int64_t c = ceil_div(G[d], tiles(s.dims[d]));
      NodeRef idx = build::iota(t, DType::int32, x->shape(), d);
      NodeRef off = build::broadcast_in_dim(t, offset(s.dims[d], c), x->shape(), {});
      NodeRef global = build::binary(t, Op::add, idx, off);
      NodeRef lim = build::broadcast_in_dim(t, build::scalar(t, DType::int32, double(G[d])), x->shape(), {});
      NodeRef ok = build::binary(t, Op::lt, global, lim);
      valid = valid ? build::binary(t, Op::and_, valid, ok) : ok;
    }
    if (!valid) return x;
    NodeRef f = build::broadcast_in_dim(t, build::constant(t, std::make_shared<const Literal>(fill)), x->shape(), {});
    return build::select(t, valid, x, f);
  }

  // ---------------------------------------------------------------- ops

  NodeRef emit(const NodeRef& n) {
    if (n->op == Op::shard_map) return emit_shard_map(*n);
    if (is_control_flow(n->op)) return emit_control(*n);
    if (n->op == Op::get_tuple_element && is_control_flow(n->in[0]->op)) {
      // A result of a control-flow op: laid out as its boundary says.
      const auto k = n->attr<attr::TupleIndex>().index;
      NodeRef r = build::get_tuple_element(t, local.at(n->in[0].get()), k);
      return reshard(r, n->shape(), a.regions.at(n->in[0].get()).results.at(size_t(k)), a.value.at(n.get()));
    }
    if (n->op == Op::get_tuple_element && has_factored_elements(*n->in[0])) {
      // An element of lu, qr, ...: laid out as the op's rule left it.
      const auto k = n->attr<attr::TupleIndex>().index;
      NodeRef r = build::get_tuple_element(t, local.at(n->in[0].get()), k);
      return reshard(r, n->shape(), element_natural.at(n->in[0].get()).at(size_t(k)), a.value.at(n.get()));
    }
    if (n->aval.tuple && !has_factored_elements(*n))
      throw InternalError(std::string("a tuple-valued ") + op_name(n->op) + " reached the partitioner");
    if (n->op == Op::get_tuple_element && n->in[0]->op == Op::shard_map) {
      // An element of a shard_map's results: laid out as its out_spec.
      const auto k = n->attr<attr::TupleIndex>().index;
      NodeRef r = build::get_tuple_element(t, local.at(n->in[0].get()), k);
      return reshard(r, n->shape(), shard_map_out.at(n->in[0].get()).at(size_t(k)), a.value.at(n.get()));
    }
    if (n->op == Op::parameter) {
      const AxisSharding& value = a.value.at(n.get());
      Aval av = n->aval;
      av.shape = value.tile_shape(n->shape());
      return build::parameter(t, int(n->attr<attr::Parameter>().index), av);
    }
    FactorRule rule = rules(n->op).factors(*n);
    const auto& fa = a.factor_axes.at(n.get());
    // Operands as this op needs them.
    std::vector<NodeRef> ops;
    std::vector<AxisSharding> op_sh;
    for (size_t k = 0; k < n->in.size(); ++k) {
      const NodeRef& x = n->in[k];
      if (rule.is_unread(k)) {  // read for ordering only: as it is
        ops.push_back(local.at(x.get()));
        op_sh.push_back(a.value.at(x.get()));
        continue;
      }
      AxisSharding want = sharding_from_factors(mesh, rule.operands[k], fa);
      NodeRef lx = reshard(local.at(x.get()), x->shape(), a.value.at(x.get()), want);
      // Padding of split, uneven reduced dims must not count.
      std::vector<int> reduced_dims;
      for (size_t d = 0; d < rule.operands[k].size(); ++d)
        for (int f : rule.operands[k][d])
          if (rule.reduction[f] && !fa[f].empty()) reduced_dims.push_back(int(d));
      if (!reduced_dims.empty()) lx = mask(lx, x->shape(), want, reduced_dims, reduction_identity(rule.reduce_op, x->dtype()));
      ops.push_back(lx);
      op_sh.push_back(want);
    }
    if (n->aval.tuple) {
      // Each element comes out as the rule lays it out; its get_tuple_element reshards it.
      auto& nat = element_natural[n.get()];
      for (auto& dims : rule.results) nat.push_back(sharding_from_factors(mesh, dims, fa));
      TESSEL_CHECK_INTERNAL(unreduced_axes(rule, fa).empty(), op_name(n->op), " has partial results");
      return rules(n->op).local(*this, *n, ops, op_sh, nat.at(0));
    }
    const AxisSharding& value = a.value.at(n.get());
    AxisSharding natural = sharding_from_factors(mesh, rule.result, fa);
    const std::vector<int> unreduced = unreduced_axes(rule, fa);
    NodeRef r = rules(n->op).local(*this, *n, ops, op_sh, natural);  // the op's own partition rule
    if (!unreduced.empty() && tiles(unreduced) > 1) {
      // Partial sums: reduce-scatter straight into the value's sharding when
      // it splits one dim further by exactly these axes; else all-reduce.
      // (Partial over axes of one device in all, a sum is already whole:
      // XLA drops such all-reduces too.)
      const int scatter_dim = reduce_scatter_dim(natural, value, unreduced, n->shape());
      if (scatter_dim >= 0) return build::reduce_scatter(t, r, mesh, unreduced, scatter_dim, rule.reduce_op);
      r = build::all_reduce(t, r, mesh, unreduced, rule.reduce_op);
    }
    return reshard(r, n->shape(), natural, value);
  }

  // shard_map: its body is a program over the axes it leaves automatic,
  // propagated and partitioned like any other (nested shard_maps recurse);
  // with none left it is already a per-device program and comes out as it
  // is. Each operand is resharded to its in_spec over the manual axes,
  // joined (minor) with the automatic split its body parameter takes: the
  // operand's own, where it splits the block evenly. Each result leaves
  // joined the same way, and is resharded to its value's sharding.
  NodeRef emit_shard_map(const Node& n) {
    const auto& sm = n.attr<attr::ShardMap>();
    const Graph& body = *sm.body;
    auto is_manual = [&](int x) { return std::find(sm.manual.begin(), sm.manual.end(), x) != sm.manual.end(); };
    // The automatic part of s, dims the block b does not split evenly left whole.
    auto automatic = [&](const AxisSharding& s, const Shape& b) {
      AxisSharding r{mesh, std::vector<std::vector<int>>(b.size()), {}};
      for (size_t d = 0; d < b.size(); ++d) {
        for (int x : s.dims[d])
          if (!is_manual(x)) r.dims[d].push_back(x);
        if (b[d] % tiles(r.dims[d]) != 0) r.dims[d].clear();
      }
      return r;
    };
    auto join = [&](const AxisSharding& spec, const AxisSharding& aut) {
      AxisSharding j = spec;
      for (size_t d = 0; d < j.dims.size(); ++d) j.dims[d].insert(j.dims[d].end(), aut.dims[d].begin(), aut.dims[d].end());
      return j;
    };
    PropagationInput pin{mesh, {}};
    std::vector<NodeRef> ops;
    for (size_t k = 0; k < n.in.size(); ++k) {
      const NodeRef& x = n.in[k];
      AxisSharding aut = automatic(a.value.at(x.get()), body.params[k]->shape());
      ops.push_back(reshard(local.at(x.get()), x->shape(), a.value.at(x.get()), join(sm.in_specs[k], aut)));
      pin.params.push_back(std::move(aut));
    }
    std::vector<int> inner = manual;
    inner.insert(inner.end(), sm.manual.begin(), sm.manual.end());
    const ShardingAssignment ba = propagate(body, pin);
    Partitioner sub(body, ba, mesh, t, inner);
    for (size_t k = 0; k < body.params.size(); ++k) sub.local[body.params[k].get()] = ops[k];
    for (auto& b : body.topo_order())
      if (b->op != Op::parameter) sub.local[b.get()] = sub.emit(b);
    for (auto& e : body.effects) effects.push_back(sub.local.at(e.get()));
    effects.insert(effects.end(), sub.effects.begin(), sub.effects.end());
    std::vector<NodeRef> outs;
    auto& joined = shard_map_out[&n];
    for (size_t i = 0; i < body.outputs.size(); ++i) {
      const NodeRef& o = body.outputs[i];
      const AxisSharding& v = ba.value.at(o.get());
      AxisSharding aut = automatic(v, o->shape());
      outs.push_back(sub.reshard(sub.local.at(o.get()), o->shape(), v, aut));
      joined.push_back(join(sm.out_specs[i], aut));
    }
    if (n.aval.tuple) return build::tuple(t, outs);  // its elements reshard at their get_tuple_element
    return reshard(outs[0], n.shape(), joined[0], a.value.at(&n));
  }

  // A region of a control-flow op as a per-device program of its own: its
  // parameters laid out as `params`, propagated and partitioned like any
  // program, its outputs resharded to `outputs`.
  GraphRef partition_region(const Graph& r, const std::vector<AxisSharding>& params,
                            const std::vector<AxisSharding>& outputs) {
    PropagationInput pin{mesh, {}};
    for (auto& p : params) pin.params.push_back(p);
    const ShardingAssignment ra = propagate(r, pin);
    NodeTable table;
    Partitioner sub(r, ra, mesh, table, manual);
    auto g = std::make_shared<Graph>();
    g->name = r.name;
    for (auto& n : r.topo_order()) sub.local[n.get()] = sub.emit(n);  // every parameter among them
    for (auto& prm : r.params) g->params.push_back(sub.local.at(prm.get()));
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      const NodeRef& o = r.outputs[k];
      g->outputs.push_back(sub.reshard(sub.local.at(o.get()), o->shape(), ra.value.at(o.get()), outputs.at(k)));
    }
    for (auto& e : r.effects) g->effects.push_back(sub.local.at(e.get()));
    g->effects.insert(g->effects.end(), sub.effects.begin(), sub.effects.end());
    return g;
  }

  // cond, while_, scan: operands resharded to the op's boundary, each region
  // partitioned as a program of its own (tracer/propagate.hpp,
  // RegionShardings); the op runs on local values, its regions per device.
  NodeRef emit_control(const Node& n) {
    const RegionShardings& rs = a.regions.at(&n);
    std::vector<NodeRef> ops;
    for (size_t k = 0; k < n.in.size(); ++k) {
      const NodeRef& x = n.in[k];
      ops.push_back(reshard(local.at(x.get()), x->shape(), a.value.at(x.get()), rs.operands.at(k)));
    }
    if (n.op == Op::scan) {
      const auto& sc = n.attr<attr::Scan>();
      for (size_t k = size_t(sc.consts + sc.carries); k < n.in.size(); ++k)
        if (!rs.operands[k].dims[0].empty()) return emit_split_scan(n, ops);
    }
    auto regions = n.regions();
    std::vector<GraphRef> local_regions;
    for (size_t i = 0; i < regions.size(); ++i)
      local_regions.push_back(partition_region(*regions[i], rs.params.at(i), rs.outputs.at(i)));
    return with_regions(t, n, local_regions, ops);
  }

  // A scan over xs split along the scanned axis: each device keeps its
  // block of every such xs as a constant of the loop, and each step the
  // device holding row i sends it to the others (an all-reduce over the
  // split's axes of the row where this device holds it and zeros
  // elsewhere, on the row's bits as integers, so the sum is the row
  // exactly). A step counter, carried first, says which row. Memory stays
  // one block and one row per device; the whole stack is never gathered.
  NodeRef emit_split_scan(const Node& n, const std::vector<NodeRef>& ops) {
    const RegionShardings& rs = a.regions.at(&n);
    const auto& sc = n.attr<attr::Scan>();
    const size_t c = size_t(sc.consts), m = size_t(sc.carries), q = n.in.size() - c - m;
    const Graph& body = *sc.body;
    GraphRef local_body = partition_region(body, rs.params.at(0), rs.outputs.at(0));
    std::vector<size_t> split, whole;  // xs by whether their scanned axis is split
    for (size_t k = 0; k < q; ++k) (rs.operands[c + m + k].dims[0].empty() ? whole : split).push_back(k);
    NodeTable w;
    auto g = std::make_shared<Graph>();
    g->name = "split_scan(" + body.name + ")";
    auto param = [&](const Aval& av) {
      Aval s = av;
      s.weak_type = false;
      g->params.push_back(build::parameter(w, int(g->params.size()), s));
      return g->params.back();
    };
    std::vector<NodeRef> consts, blocks, carries, xs;
    for (size_t k = 0; k < c; ++k) consts.push_back(param(ops[k]->aval));
    for (size_t k : split) blocks.push_back(param(ops[c + m + k]->aval));
    NodeRef counter = param(Aval{DType::int32, {}, false});
    for (size_t k = 0; k < m; ++k) carries.push_back(param(ops[c + k]->aval));
    for (size_t k : whole) {
      Aval s = ops[c + m + k]->aval;
      s.shape.erase(s.shape.begin());
      xs.push_back(param(s));
    }
    // Each split xs' row for this step.
    std::vector<NodeRef> rows(q);
    for (size_t j = 0; j < whole.size(); ++j) rows[whole[j]] = xs[j];
    for (size_t j = 0; j < split.size(); ++j) {
      const size_t k = split[j];
      const std::vector<int>& axes = rs.operands[c + m + k].dims[0];
      const NodeRef& blk = blocks[j];
      const std::int64_t per = blk->shape()[0];  // rows per block (padded)
      NodeRef owner = build::binary(w, Op::div, counter, build::scalar(w, DType::int32, double(per)));
      NodeRef at = build::binary(w, Op::sub, counter, build::binary(w, Op::mul, owner, build::scalar(w, DType::int32, double(per))));
      std::vector<NodeRef> starts(blk->shape().size(), build::scalar(w, DType::int32, 0));
      starts[0] = at;
      Shape one = blk->shape();
      one[0] = 1;
      Shape row_shape(blk->shape().begin() + 1, blk->shape().end());
      NodeRef row = build::reshape(w, build::dynamic_slice(w, blk, starts, one), row_shape);
      // Its bits as integers: one device adds them, the others zeros.
      const DType t = row->dtype();
      const DType bits = t == DType::float32 ? DType::int32 : t == DType::float64 ? DType::int64 : t == DType::bool_ ? DType::int32 : t;
      NodeRef v = t == DType::float32 || t == DType::float64 ? build::bitcast_convert(w, row, bits)
                  : t == DType::bool_ ? build::convert(w, row, bits) : row;
      NodeRef mine = build::binary(w, Op::eq, build::axis_index(w, mesh, axes), owner);
      NodeRef zero = build::broadcast_in_dim(w, build::scalar(w, bits, 0), row_shape, {});
      v = build::select(w, build::broadcast_in_dim(w, mine, row_shape, {}), v, zero);
      v = build::all_reduce(w, v, mesh, axes, Op::add);
      rows[k] = t == DType::float32 || t == DType::float64 ? build::bitcast_convert(w, v, t)
                : t == DType::bool_ ? build::convert(w, v, t) : v;
    }
    std::vector<NodeRef> inner = consts;
    inner.insert(inner.end(), carries.begin(), carries.end());
    inner.insert(inner.end(), rows.begin(), rows.end());
    NodeRef step = build::scalar(w, DType::int32, sc.reverse ? -1 : 1);
    g->outputs.push_back(build::binary(w, Op::add, counter, step));
    for (auto& o : inline_graph(w, *local_body, inner, &g->effects)) g->outputs.push_back(o);
    attr::Scan ls = sc;
    ls.body = g;
    ls.consts = std::int64_t(c + split.size());
    ls.carries = std::int64_t(m + 1);
    std::vector<NodeRef> lops(ops.begin(), ops.begin() + std::ptrdiff_t(c));
    for (size_t k : split) lops.push_back(ops[c + m + k]);
    lops.push_back(build::scalar(t, DType::int32, sc.reverse ? double(sc.length - 1) : 0.0));
    for (size_t k = 0; k < m; ++k) lops.push_back(ops[c + k]);
    for (size_t k : whole) lops.push_back(ops[c + m + k]);
    auto r = build::results(t, build::scan(t, std::move(ls), lops));
    // The op's own results: all but the counter.
    return build::tuple(t, std::vector<NodeRef>(r.begin() + 1, r.end()));
  }

  // LocalBuilder, for the ops' partition rules (Rule<Op>::local).
  NodeTable& table() override { return t; }
  const MeshRef& device_mesh() const override { return mesh; }
  bool in_shard_map() const override { return !manual.empty(); }
};

}  // namespace

PartitionedProgram partition(const Graph& g, const ShardingAssignment& a) {
  NodeTable t;
  Partitioner p(g, a, a.mesh, t, {});
  PartitionedProgram out;
  out.mesh = a.mesh;
  for (auto& n : g.topo_order()) p.local[n.get()] = p.emit(n);
  out.local.name = g.name;
  for (auto& prm : g.params) {
    out.local.params.push_back(p.local.at(prm.get()));
    out.param_shardings.push_back(a.value.at(prm.get()));
  }
  for (auto& o : g.outputs) {
    out.local.outputs.push_back(p.local.at(o.get()));
    out.output_shardings.push_back(a.value.at(o.get()));
  }
  for (auto& e : g.effects) out.local.effects.push_back(p.local.at(e.get()));
  out.local.effects.insert(out.local.effects.end(), p.effects.begin(), p.effects.end());
  return out;
}

}  // namespace tessel
