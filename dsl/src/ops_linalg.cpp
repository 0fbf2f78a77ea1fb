// dot, matmul, tensordot, outer, einsum: all one dot_general, with
// transposes and reshapes around it.
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include <tessel/dtype_info.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/promotion.hpp"

namespace tessel {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;
using detail::cat;

namespace {

// Promoted operands for a product, in the dtype it computes in: the
// preferred element type when that holds every operand value (bfloat16 to
// float32, int8 to int32) or the operands are integers and it is a float.
std::pair<NodeRef, NodeRef> operands(NodeTable& t, const NodeRef& a, const NodeRef& b, const char* what,
                                     std::optional<DType> preferred = std::nullopt) {
  PromotedType pt = promote_types(a->dtype(), a->aval.weak_type, b->dtype(), b->aval.weak_type);
  if (pt.dtype == DType::bool_) pt = {DType::int32, pt.weak};
  if (preferred) {
    if (is_inexact(pt.dtype) && !is_inexact(*preferred))
      throw TypeError(cat(what, ": preferred_element_type ", dtype_name(*preferred), " is not a floating type for ",
                          dtype_name(pt.dtype), " operands"));
    if (is_complex(pt.dtype) && !is_complex(*preferred))
      throw TypeError(cat(what, ": preferred_element_type ", dtype_name(*preferred), " is not complex for ",
                          dtype_name(pt.dtype), " operands"));
    if (can_cast(pt.dtype, *preferred, "safe") || (!is_inexact(pt.dtype) && is_inexact(*preferred)))
      pt = {*preferred, false};
  }
  return {c::cast(t, a, pt.dtype, pt.weak), c::cast(t, b, pt.dtype, pt.weak)};
}

// The product's result as the preferred element type (a narrower one rounds it).
NodeRef finish(NodeTable& t, const NodeRef& r, std::optional<DType> preferred) {
  return preferred ? c::cast(t, r, *preferred, false) : r;
}

}  // namespace

Array dot(const Array& a, const Array& b) { return dot(a, b, DotOptions{}); }

Array dot(const Array& a, const Array& b, const DotOptions& options) {
  const auto pref = options.preferred_element_type;
  return apply1("tessel.dot", {a, b}, [pref](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.dot", pref);
    if (x->rank() == 0 || y->rank() == 0) return finish(t, c::binary(t, Op::mul, x, y, "tessel.dot"), pref);
    // numpy.dot: the last dim of a with the second-to-last of b (or its only one).
    std::int64_t ca = x->rank() - 1, cb = y->rank() == 1 ? 0 : y->rank() - 2;
    if (x->shape()[ca] != y->shape()[cb])
      throw ShapeError("dot: shapes " + shape_str(x->shape()) + " and " + shape_str(y->shape()) +
                       " not aligned: " + std::to_string(x->shape()[ca]) + " (dim " + std::to_string(ca) +
                       ") != " + std::to_string(y->shape()[cb]) + " (dim " + std::to_string(cb) + ")");
    return finish(t, build::dot_general(t, x, y, DotDims{{ca}, {cb}, {}, {}}), pref);
  });
}

Array matmul(const Array& a, const Array& b) { return matmul(a, b, DotOptions{}); }

Array matmul(const Array& a, const Array& b, const DotOptions& options) {
  const auto pref = options.preferred_element_type;
  return apply1("tessel.matmul", {a, b}, [pref](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.matmul", pref);
    if (x->rank() == 0 || y->rank() == 0)
      throw ShapeError(cat("matmul: operands must not be scalars (rank 0), got shapes ", shape_str(x->shape()),
                           " and ", shape_str(y->shape())));
    const bool xv = x->rank() == 1, yv = y->rank() == 1;
    if (xv) x = build::reshape(t, x, {1, x->shape()[0]});
    if (yv) y = build::reshape(t, y, {y->shape()[0], 1});
    // Broadcast the batch dims.
    Shape xb(x->shape().begin(), x->shape().end() - 2), yb(y->shape().begin(), y->shape().end() - 2);
    Shape batch = c::broadcast_shapes(xb, yb, "tessel.matmul");
    Shape xs = batch, ys = batch;
    xs.insert(xs.end(), x->shape().end() - 2, x->shape().end());
    ys.insert(ys.end(), y->shape().end() - 2, y->shape().end());
    x = c::broadcast_to(t, x, xs, "tessel.matmul");
    y = c::broadcast_to(t, y, ys, "tessel.matmul");
    const std::int64_t nb = std::int64_t(batch.size());
    if (x->shape()[nb + 1] != y->shape()[nb])
      throw ShapeError("matmul: contracting dimensions differ: " + shape_str(in[0]->shape()) + " @ " +
                       shape_str(in[1]->shape()));
    std::vector<std::int64_t> bd;
    for (std::int64_t i = 0; i < nb; ++i) bd.push_back(i);
    NodeRef r = build::dot_general(t, x, y, DotDims{{nb + 1}, {nb}, bd, bd});
    Shape out = batch;
    if (!xv) out.push_back(x->shape()[nb]);
    if (!yv) out.push_back(y->shape()[nb + 1]);
    return finish(t, build::reshape(t, r, out), pref);
  });
}

Array tensordot(const Array& a, const Array& b, const std::pair<std::vector<int>, std::vector<int>>& axes) {
  return apply1("tessel.tensordot", {a, b}, [axes](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.tensordot");
    if (axes.first.size() != axes.second.size())
      throw ShapeError(cat("tensordot: axes lists differ in length: ", axes.first.size(), " axes of ",
                           shape_str(x->shape()), " and ", axes.second.size(), " axes of ", shape_str(y->shape())));
    DotDims d;
    for (size_t i = 0; i < axes.first.size(); ++i) {
      d.lhs_contract.push_back(c::norm_axis(axes.first[i], x->rank(), "tessel.tensordot"));
      d.rhs_contract.push_back(c::norm_axis(axes.second[i], y->rank(), "tessel.tensordot"));
    }
    return build::dot_general(t, x, y, d);
  });
}

Array tensordot(const Array& a, const Array& b, int n) {
  if (n < 0 || n > a.ndim() || n > b.ndim())
    throw ShapeError(cat("tensordot: axes=", n, " must be between 0 and the ranks of ", shape_str(a.shape()), " and ",
                         shape_str(b.shape())));
  std::pair<std::vector<int>, std::vector<int>> axes;
  for (int i = 0; i < n; ++i) axes.first.push_back(a.ndim() - n + i), axes.second.push_back(i);
  return tensordot(a, b, axes);
}

Array outer(const Array& a, const Array& b) {
  return apply1("tessel.outer", {a, b}, [](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.outer");
    NodeRef xa = build::reshape(t, x, {numel(x->shape()), 1});
    NodeRef ya = build::reshape(t, y, {1, numel(y->shape())});
    return c::binary(t, Op::mul, xa, ya, "tessel.outer");
  });
}

namespace lax {
Array dot_general(const Array& a, const Array& b, const DotDimensionNumbers& d) {
  return dot_general(a, b, d, DotOptions{});
}
Array dot_general(const Array& a, const Array& b, const DotDimensionNumbers& d, const DotOptions& options) {
  const auto pref = options.preferred_element_type;
  return apply1("lax.dot_general", {a, b}, [d, pref](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "lax.dot_general", pref);
    return finish(t, build::dot_general(t, x, y, DotDims{d.lhs_contracting, d.rhs_contracting, d.lhs_batch, d.rhs_batch}),
                  pref);
  });
}
}  // namespace lax

// ---------------------------------------------------------------- einsum

namespace {

// Sums away the labels of x not in `keep`; returns the remaining labels.
NodeRef sum_labels(NodeTable& t, NodeRef x, std::string& labels, const std::string& keep) {
  std::vector<std::int64_t> axes;
  std::string rest;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (keep.find(labels[i]) == std::string::npos) axes.push_back(std::int64_t(i));
    else rest += labels[i];
  }
  labels = rest;
  return build::reduce(t, Op::reduce_sum, x, axes);
}

// Takes the diagonal of repeated labels in one operand ("ii->i").
NodeRef diagonal_labels(NodeTable& t, NodeRef x, std::string& labels) {
  for (;;) {
    size_t i = 0, j = std::string::npos;
    for (; i < labels.size() && j == std::string::npos; ++i) j = labels.find(labels[i], i + 1);
    if (j == std::string::npos) return x;
    --i;
    // Keep x where index i == index j, sum over j.
    const Shape& s = x->shape();
    if (s[i] != s[j])
      throw ShapeError(cat("einsum: label '", labels[i], "' repeats in one operand over dimensions of sizes ", s[i],
                           " and ", s[j], " (shape ", shape_str(s), "); a repeated label takes a diagonal"));
    NodeRef ii = build::iota(t, DType::int32, s, std::int64_t(i));
    NodeRef jj = build::iota(t, DType::int32, s, std::int64_t(j));
    NodeRef keep = build::binary(t, Op::eq, ii, jj);
    x = build::select(t, keep, x, c::full_like(t, x, 0));
    x = build::reduce(t, Op::reduce_sum, x, {std::int64_t(j)});
    labels.erase(j, 1);
  }
}

}  // namespace

namespace {

struct EinsumSpec {
  std::vector<std::string> terms;
  std::string out;
};

// Parses and checks subscripts against the operands' ranks.
EinsumSpec parse_einsum(const std::string& spec_in, const std::vector<Array>& operands_in) {
  std::string spec;
  for (char ch : spec_in)
    if (ch != ' ') spec += ch;
  for (char ch : spec)
    if (!std::isalpha((unsigned char)ch) && ch != ',' && ch != '-' && ch != '>')
      throw ValueError(cat("einsum: invalid character '", ch, "' in subscripts '", spec_in,
                           "' (labels are letters; ellipsis is not supported)"));
  auto arrow = spec.find("->");
  if (arrow != std::string::npos && spec.find("->", arrow + 2) != std::string::npos)
    throw ValueError(cat("einsum: subscripts '", spec_in, "' have more than one '->'"));
  if (std::count(spec.begin(), spec.end(), '-') != std::count(spec.begin(), spec.end(), '>') ||
      std::count(spec.begin(), spec.end(), '-') > 1)
    throw ValueError(cat("einsum: subscripts '", spec_in, "' have a stray '-' or '>' (the output follows '->')"));
  std::string lhs = arrow == std::string::npos ? spec : spec.substr(0, arrow);
  EinsumSpec r;
  auto& terms = r.terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != operands_in.size())
    throw ValueError("einsum: " + std::to_string(terms.size()) + " terms in '" + spec_in + "' for " +
                     std::to_string(operands_in.size()) + " operands");
  auto& out = r.out;
  if (arrow != std::string::npos) {
    out = spec.substr(arrow + 2);
  } else {
    // Implicit output: labels appearing once, sorted.
    std::map<char, int> count;
    for (auto& t : terms)
      for (char ch : t) ++count[ch];
    for (auto& [ch, n] : count)
      if (n == 1) out += ch;
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out.find(out[i], i + 1) != std::string::npos)
      throw ValueError(cat("einsum: output subscript '", out[i], "' appears more than once in '", spec_in, "'"));
  for (size_t k = 0; k < terms.size(); ++k)
    if (std::int64_t(terms[k].size()) != operands_in[k].ndim())
      throw ShapeError("einsum: term '" + terms[k] + "' has " + std::to_string(terms[k].size()) +
                       " labels for an operand of shape " + shape_str(operands_in[k].shape()));
  return r;
}

// The size of each label (the first operand that has it; the contraction
// checks that they agree).
std::map<char, std::int64_t> label_sizes(const EinsumSpec& e, const std::vector<Array>& xs) {
  std::map<char, std::int64_t> size;
  for (size_t k = 0; k < xs.size(); ++k)
    for (size_t i = 0; i < e.terms[k].size(); ++i) size.emplace(e.terms[k][i], xs[k].shape()[i]);
  return size;
}

std::string unique_labels(const std::string& s) {
  std::string r;
  for (char ch : s)
    if (r.find(ch) == std::string::npos) r += ch;
  return r;
}

struct PathStep {
  int i, j;                   // positions in the current list (i < j); both leave it, the result goes last
  std::string a, b, result;   // their labels and the result's
  double flops;               // multiply-adds of the step
  double grows;               // result size minus the inputs' sizes
};

// One step's result labels (those the output or another operand needs),
// its multiply-adds (the product of every label of the pair), and the
// memory it removes (result size minus the two inputs').
PathStep make_step(const std::vector<std::string>& labels, int i, int j, const std::string& out,
                   const std::map<char, std::int64_t>& size) {
  auto numel_of = [&](const std::string& l) {
    double n = 1;
    for (char ch : l) n *= double(size.at(ch));
    return n;
  };
  std::string later = out;
  for (int k = 0; k < int(labels.size()); ++k)
    if (k != i && k != j) later += labels[size_t(k)];
  const std::string &a = labels[size_t(i)], &b = labels[size_t(j)];
  std::string res;
  for (char ch : unique_labels(a + b))
    if (later.find(ch) != std::string::npos) res += ch;
  return {i, j, a, b, res, numel_of(unique_labels(a + b)), numel_of(res) - numel_of(a) - numel_of(b)};
}

std::vector<std::string> after(std::vector<std::string> labels, const PathStep& s) {
  labels.erase(labels.begin() + s.j);
  labels.erase(labels.begin() + s.i);
  labels.push_back(s.result);
  return labels;
}

// opt_einsum's greedy path: while more than one operand is left, contract
// the pair whose result removes the most memory, pairs sharing a label
// first, ties to the fewer multiply-adds, then the earliest pair.
std::vector<PathStep> greedy_path(std::vector<std::string> labels, const std::string& out,
                                  const std::map<char, std::int64_t>& size) {
  std::vector<PathStep> path;
  while (labels.size() > 1) {
    bool found = false, found_shared = false;
    PathStep best{};
    for (int i = 0; i < int(labels.size()); ++i)
      for (int j = i + 1; j < int(labels.size()); ++j) {
        const std::string &a = labels[size_t(i)], &b = labels[size_t(j)];
        const bool shared = std::any_of(a.begin(), a.end(), [&](char ch) { return b.find(ch) != std::string::npos; });
        PathStep s = make_step(labels, i, j, out, size);
        const bool better = !found || (shared && !found_shared) ||
                            (shared == found_shared && (s.grows < best.grows || (s.grows == best.grows && s.flops < best.flops)));
        if (better) best = s, found = true, found_shared = shared;
      }
    path.push_back(best);
    labels = after(labels, best);
  }
  return path;
}

// opt_einsum's optimal path: every order of pairwise contractions, the one
// with the fewest multiply-adds in all (the first such); for few operands.
void optimal_search(const std::vector<std::string>& labels, const std::string& out,
                    const std::map<char, std::int64_t>& size, std::vector<PathStep>& cur, double cost,
                    std::vector<PathStep>& best, double& best_cost) {
  if (labels.size() <= 1) {
    if (best_cost < 0 || cost < best_cost) best = cur, best_cost = cost;
    return;
  }
  for (int i = 0; i < int(labels.size()); ++i)
    for (int j = i + 1; j < int(labels.size()); ++j) {
      PathStep s = make_step(labels, i, j, out, size);
      if (best_cost >= 0 && cost + s.flops >= best_cost) continue;
      cur.push_back(s);
      optimal_search(after(labels, s), out, size, cur, cost + s.flops, best, best_cost);
      cur.pop_back();
    }
}

// JAX's default ("auto", opt_einsum's): the optimal path for up to four
// operands, the greedy one beyond.
std::vector<PathStep> plan_path(std::vector<std::string> labels, const std::string& out,
                                const std::map<char, std::int64_t>& size, const std::string& optimize) {
  for (auto& l : labels) l = unique_labels(l);
  if (optimize == "greedy" || (optimize == "auto" && labels.size() > 4)) return greedy_path(labels, out, size);
  std::vector<PathStep> cur, best;
  double best_cost = -1;
  optimal_search(labels, out, size, cur, 0, best, best_cost);
  return best;
}

}  // namespace

Array einsum(const std::string& spec_in, const std::vector<Array>& operands_in) {
  return einsum(spec_in, operands_in, DotOptions{});
}

Array einsum(const std::string& spec_in, const std::vector<Array>& operands_in, const DotOptions& options) {
  const EinsumSpec e = parse_einsum(spec_in, operands_in);
  const std::vector<PathStep> path = plan_path(e.terms, e.out, label_sizes(e, operands_in), "auto");
  const auto pref = options.preferred_element_type;
  return apply1("tessel.einsum", operands_in, [terms = e.terms, out = e.out, path, pref](NodeTable& t, const NR& in) {
    std::vector<NodeRef> xs = in;
    std::vector<std::string> labels = terms;
    for (size_t k = 0; k < xs.size(); ++k) xs[k] = diagonal_labels(t, xs[k], labels[k]);
    // Contract pair by pair along the greedy path; the result goes last.
    for (const PathStep& step : path) {
      NodeRef x = xs[size_t(step.i)], y = xs[size_t(step.j)];
      std::string al = labels[size_t(step.i)], bl = labels[size_t(step.j)];
      xs.erase(xs.begin() + step.j);
      xs.erase(xs.begin() + step.i);
      labels.erase(labels.begin() + step.j);
      labels.erase(labels.begin() + step.i);
      // Labels needed later: the output and the operands still to come.
      std::string later = out;
      for (auto& l : labels) later += l;
      x = sum_labels(t, x, al, later + bl);
      y = sum_labels(t, y, bl, later + al);
      auto [xp, yp] = operands(t, x, y, "tessel.einsum", pref);
      DotDims d;
      std::string res;
      for (size_t i = 0; i < al.size(); ++i) {
        size_t j = bl.find(al[i]);
        if (j == std::string::npos) continue;
        if (later.find(al[i]) != std::string::npos) d.lhs_batch.push_back(std::int64_t(i)), d.rhs_batch.push_back(std::int64_t(j));
        else d.lhs_contract.push_back(std::int64_t(i)), d.rhs_contract.push_back(std::int64_t(j));
      }
      for (auto i : d.lhs_batch) res += al[size_t(i)];
      for (size_t i = 0; i < al.size(); ++i)
        if (bl.find(al[i]) == std::string::npos) res += al[i];
      for (size_t j = 0; j < bl.size(); ++j)
        if (al.find(bl[j]) == std::string::npos) res += bl[j];
      for (size_t i = 0; i < d.lhs_batch.size(); ++i)
        if (xp->shape()[size_t(d.lhs_batch[i])] != yp->shape()[size_t(d.rhs_batch[i])])
          throw ShapeError(cat("einsum: label '", res[i], "' has size ", xp->shape()[size_t(d.lhs_batch[i])],
                               " in one operand (", shape_str(xp->shape()), ") and ", yp->shape()[size_t(d.rhs_batch[i])],
                               " in another (", shape_str(yp->shape()), ")"));
      for (size_t i = 0; i < d.lhs_contract.size(); ++i)
        if (xp->shape()[size_t(d.lhs_contract[i])] != yp->shape()[size_t(d.rhs_contract[i])])
          throw ShapeError(cat("einsum: label '", al[size_t(d.lhs_contract[i])], "' has size ",
                               xp->shape()[size_t(d.lhs_contract[i])], " in one operand (", shape_str(xp->shape()),
                               ") and ", yp->shape()[size_t(d.rhs_contract[i])], " in another (", shape_str(yp->shape()), ")"));
      xs.push_back(build::dot_general(t, xp, yp, d));
      labels.push_back(res);
    }
    NodeRef acc = xs[0];
    std::string al = labels[0];
    acc = sum_labels(t, acc, al, out);
    // Order the remaining labels as the output asks.
    std::vector<std::int64_t> perm;
    for (char ch : out) {
      auto p = al.find(ch);
      if (p == std::string::npos) throw ValueError(std::string("einsum: output label '") + ch + "' is in no operand");
      perm.push_back(std::int64_t(p));
    }
    return finish(t, build::transpose(t, acc, perm), pref);
  });
}

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(const std::string& subscripts,
                                                                  const std::vector<Array>& operands,
                                                                  const std::string& optimize) {
  if (optimize != "greedy" && optimize != "optimal" && optimize != "auto")
    throw NotImplementedError("einsum_path: optimize='" + optimize + "' (tessel plans by opt_einsum's 'optimal' and "
                              "'greedy'; 'auto', JAX's default, is optimal up to four operands, greedy beyond)");
  const EinsumSpec e = parse_einsum(subscripts, operands);
  const auto size = label_sizes(e, operands);
  const std::vector<PathStep> steps = plan_path(e.terms, e.out, size, optimize);
  std::vector<std::vector<int>> path;
  std::ostringstream info;
  double naive = 1, total = 0;
  std::string all;
  for (auto& term : e.terms) all += term;
  for (char ch : unique_labels(all)) naive *= double(size.at(ch));
  for (auto& s : steps) total += s.flops;
  info << "  Complete contraction:  " << subscripts << "\n"
       << "  Naive FLOP count:  " << naive * double(std::max<size_t>(e.terms.size() - 1, 1)) << "\n"
       << "  Optimized FLOP count:  " << total << "\n"
       << "  contraction   (positions)\n";
  for (auto& s : steps) {
    path.push_back({s.i, s.j});
    info << "  " << s.a << "," << s.b << "->" << s.result << "   (" << s.i << ", " << s.j << ")\n";
  }
  if (steps.empty()) path.push_back({0});  // one operand: opt_einsum's (0,)
  return {path, info.str()};
}

}  // namespace tessel
