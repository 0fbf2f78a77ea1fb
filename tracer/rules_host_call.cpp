// Rules of host_call (attr::HostCall): a host C++ function run on each
// device's blocks — ts::pure_callback and ts::ffi::call.
//
// Its factor rule is the user's (ffi::call's sharding_rule, parsed by the
// dsl into factor ids per dim): a factor of a result keeps the split its
// operands have (no gather), a factor only in operands is contracted (each
// device's result is a partial sum, all-reduced by the partitioner; with
// several results, which cannot be partial, it is gathered instead), and a
// `replicated` factor is gathered whole. pure_callback's rule makes every
// dim replicated: the function sees whole arrays, on every device.
// Reference kernel: the function on the whole arrays (one block).
// Derivatives: none (JAX's pure_callback and ffi_call have none): wrap the
// call in ts::custom_jvp or ts::custom_vjp. Batching: the vmap_method.
// Local form: the same call on the local blocks, its results' shapes those
// of the blocks (a factor's local size is that of an operand dim it splits).
#include <algorithm>
#include <map>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;

namespace {

using Factors = std::vector<std::vector<std::int64_t>>;

// Each factor's size: from the operand dims it names, and for a factor only
// of the results (whole on every device: it must be replicated) p.sizes'.
std::map<std::int64_t, std::int64_t> factor_sizes(const attr::HostCall& p, const std::vector<Shape>& shapes) {
  const Factors& of = p.operand_factors;
  std::map<std::int64_t, std::int64_t> size;
  if (of.size() != shapes.size())
    throw InternalError(cat(p.name, ": ", shapes.size(), " operands for a rule of ", of.size()));
  for (std::size_t k = 0; k < of.size(); ++k) {
    if (of[k].size() != shapes[k].size())
      throw InternalError(cat(p.name, ": operand ", k, " has rank ", shapes[k].size(), ", the rule ", of[k].size()));
    for (std::size_t d = 0; d < of[k].size(); ++d) {
      const std::int64_t f = of[k][d];
      if (f < 0) continue;
      auto [it, fresh] = size.emplace(f, shapes[k][d]);
      if (!fresh && it->second != shapes[k][d])
        throw InternalError(cat(p.name, ": factor ", f, " has sizes ", it->second, " and ", shapes[k][d]));
    }
  }
  for (auto& dims : p.result_factors)
    for (std::int64_t f : dims) {
      if (f < 0 || size.count(f)) continue;
      if (f >= std::int64_t(p.sizes.size()) || std::count(p.replicated.begin(), p.replicated.end(), f) == 0)
        throw InternalError(cat(p.name, ": result factor ", f, " is in no operand and not replicated"));
      size.emplace(f, p.sizes[std::size_t(f)]);
    }
  return size;
}

// The results' shapes for operands of these shapes.
std::vector<Shape> result_shapes(const attr::HostCall& p, const std::vector<Shape>& in) {
  const auto size = factor_sizes(p, in);
  std::vector<Shape> out;
  for (auto& dims : p.result_factors) {
    Shape s;
    for (std::int64_t f : dims) s.push_back(f < 0 ? 1 : size.at(f));
    out.push_back(s);
  }
  return out;
}

Aval pack_avals(const std::vector<DType>& dtypes, const std::vector<Shape>& shapes) {
  std::vector<Aval> avals;
  for (std::size_t k = 0; k < dtypes.size(); ++k) avals.push_back(Aval{dtypes[k], shapes[k], false});
  return avals.size() == 1 ? avals[0] : Aval::make_tuple(avals);
}

}  // namespace

Aval Rule<Op::host_call>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.fn) throw InternalError(cat(p.name, " without a function"));
  std::vector<Shape> shapes;
  for (auto& a : in) {
    if (a.tuple) throw TypeError(cat(p.name, " takes arrays, got ", rule_util::avals_str(in)));
    shapes.push_back(a.shape);
  }
  if (p.dtypes.size() != p.shapes.size() || p.dtypes.size() != p.result_factors.size())
    throw InternalError(cat(p.name, ": results and their rule disagree"));
  const std::vector<Shape> want = result_shapes(p, shapes);
  if (want != p.shapes) throw InternalError(cat(p.name, ": the rule's result shapes differ from the declared ones"));
  return pack_avals(p.dtypes, p.shapes);
}

void Rule<Op::host_call>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  std::vector<attr::HostCallArg> args, results;
  for (auto* x : in) args.push_back({x->dtype, x->shape, const_cast<unsigned char*>(x->bytes.data()), -1});
  std::vector<HostArray> outs(p.dtypes.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    rule_util::allocate(outs[k], Aval{p.dtypes[k], p.shapes[k], false});
    results.push_back({p.dtypes[k], p.shapes[k], outs[k].bytes.data(), -1});
  }
  (*p.fn)(args, results);
  if (!aval.tuple) {
    out = std::move(outs[0]);
    return;
  }
  std::vector<const HostArray*> ptrs;
  for (auto& o : outs) ptrs.push_back(&o);
  rule_util::pack_tuple(out, ptrs);
}

FactorRule Rule<Op::host_call>::factors(const Node& n) {
  const auto& p = attrs_of(n);
  std::vector<Shape> shapes;
  for (auto& x : n.in) shapes.push_back(x->shape());
  const auto size = factor_sizes(p, shapes);
  std::map<std::int64_t, int> id;
  FactorRule r;
  for (auto [f, s] : size) {
    bool in_result = false;
    for (auto& dims : p.result_factors) in_result = in_result || std::count(dims.begin(), dims.end(), f) > 0;
    const bool whole = std::count(p.replicated.begin(), p.replicated.end(), f) > 0;
    // A contracted factor of a call with several results: gathered, as no
    // tuple result is a partial sum.
    const bool gathered = whole || (!in_result && p.result_factors.size() != 1);
    id[f] = r.add_factor(s, !in_result && !gathered, gathered);
  }
  auto dims_of = [&](const std::vector<std::int64_t>& fs) {
    std::vector<std::vector<int>> dims;
    for (std::int64_t f : fs) dims.push_back(f < 0 ? std::vector<int>{} : std::vector<int>{id.at(f)});
    return dims;
  };
  for (auto& fs : p.operand_factors) r.operands.push_back(dims_of(fs));
  if (p.result_factors.size() == 1) {
    r.result = dims_of(p.result_factors[0]);
  } else {
    for (auto& fs : p.result_factors) r.results.push_back(dims_of(fs));
  }
  return r;
}

NodeRef Rule<Op::host_call>::jvp(NodeTable&, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>&,
                                 const NodeRef&) {
  const auto& p = attrs_of(n);
  throw TypeError(cat(p.name, " has no derivative (JAX's pure_callback and ffi_call have none): wrap it in "
                              "ts::custom_jvp or ts::custom_vjp to differentiate through it"));
}
void Rule<Op::host_call>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                    std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

NodeRef Rule<Op::host_call>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                   const std::vector<AxisSharding>&, const AxisSharding&) {
  attr::HostCall p = attrs_of(n);
  std::vector<Shape> shapes;
  for (auto& x : ops) shapes.push_back(x->shape());
  p.shapes = result_shapes(p, shapes);
  return build::host_call(b.table(), ops, std::move(p));
}

NodeRef Rule<Op::host_call>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<bool>& batched, const BatchInfo& b) {
  attr::HostCall p = attrs_of(n);
  switch (p.vmap_method) {
    case 0:
      throw NotImplementedError(cat(p.name, " under vmap needs a vmap_method: \"sequential\", \"sequential_unrolled\", "
                                            "\"expand_dims\" or \"broadcast_all\" (as JAX's pure_callback and ffi_call)"));
    case 1: return bt::by_map(t, n, x, batched, b);
    case 2: {
      // One call per batch element, on its slices; each result stacked.
      const std::size_t m = p.dtypes.size();
      std::vector<std::vector<NodeRef>> parts(m);
      for (std::int64_t i = 0; i < b.size; ++i) {
        std::vector<NodeRef> args;
        for (std::size_t k = 0; k < x.size(); ++k) args.push_back(batched[k] ? bt::element(t, x[k], i) : x[k]);
        NodeRef y = build::host_call(t, args, p);
        for (std::size_t r = 0; r < m; ++r) {
          NodeRef e = m == 1 ? y : build::get_tuple_element(t, y, std::int64_t(r));
          Shape one = p.shapes[r];
          one.insert(one.begin(), 1);
          parts[r].push_back(build::reshape(t, e, one));
        }
      }
      std::vector<NodeRef> outs;
      for (std::size_t r = 0; r < m; ++r) {
        if (b.size == 0) {
          Shape s = p.shapes[r];
          s.insert(s.begin(), 0);
          outs.push_back(ad::zeros(t, Aval{p.dtypes[r], s, false}));
        } else {
          outs.push_back(parts[r].size() == 1 ? parts[r][0] : build::concatenate(t, parts[r], 0));
        }
      }
      return m == 1 ? outs[0] : build::tuple(t, outs);
    }
    case 3: case 4: {
      // One call on the batched operands: a leading batch factor; an
      // unbatched operand gets a leading dim of 1 (expand_dims) or the
      // whole batch (broadcast_all).
      std::int64_t batch_factor = std::int64_t(p.sizes.size());
      for (const Factors* all : {&p.operand_factors, &p.result_factors})
        for (auto& fs : *all)
          for (std::int64_t f : fs) batch_factor = std::max(batch_factor, f + 1);
      std::vector<NodeRef> args;
      for (std::size_t k = 0; k < x.size(); ++k) {
        auto& fs = p.operand_factors[k];
        if (batched[k] || p.vmap_method == 4) {
          args.push_back(bt::batched(t, x[k], batched[k], b));
          fs.insert(fs.begin(), batch_factor);
        } else {
          Shape s = x[k]->shape();
          s.insert(s.begin(), 1);
          args.push_back(build::reshape(t, x[k], s));
          fs.insert(fs.begin(), -1);
        }
      }
      for (auto& fs : p.result_factors) fs.insert(fs.begin(), batch_factor);
      p.sizes.resize(std::size_t(batch_factor) + 1, 0);
      p.sizes[std::size_t(batch_factor)] = b.size;
      for (auto& s : p.shapes) s.insert(s.begin(), b.size);
      return build::host_call(t, args, std::move(p));
    }
    default: throw InternalError(cat(p.name, ": unknown vmap_method ", p.vmap_method));
  }
}

TESSEL_COMPLEX_NONE(host_call)
TESSEL_COST(host_call, memory_cost)

}  // namespace tessel
