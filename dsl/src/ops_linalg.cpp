// dot, matmul, tensordot, outer, einsum: all one dot_general, with
// transposes and reshapes around it.
#include <algorithm>
#include <cctype>
#include <map>

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

// Promoted operands for a product.
std::pair<NodeRef, NodeRef> operands(NodeTable& t, const NodeRef& a, const NodeRef& b, const char* what) {
  PromotedType pt = promote_types(a->dtype(), a->aval.weak_type, b->dtype(), b->aval.weak_type);
  if (pt.dtype == DType::bool_) pt = {DType::int32, pt.weak};
  return {c::cast(t, a, pt.dtype, pt.weak), c::cast(t, b, pt.dtype, pt.weak)};
}

}  // namespace

Array dot(const Array& a, const Array& b) {
  return apply1("tessel.dot", {a, b}, [](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.dot");
    if (x->rank() == 0 || y->rank() == 0) return c::binary(t, Op::mul, x, y, "tessel.dot");
    // numpy.dot: the last dim of a with the second-to-last of b (or its only one).
    std::int64_t ca = x->rank() - 1, cb = y->rank() == 1 ? 0 : y->rank() - 2;
    if (x->shape()[ca] != y->shape()[cb])
      throw ShapeError("dot: shapes " + shape_str(x->shape()) + " and " + shape_str(y->shape()) +
                       " not aligned: " + std::to_string(x->shape()[ca]) + " (dim " + std::to_string(ca) +
                       ") != " + std::to_string(y->shape()[cb]) + " (dim " + std::to_string(cb) + ")");
    return build::dot_general(t, x, y, DotDims{{ca}, {cb}, {}, {}});
  });
}

Array matmul(const Array& a, const Array& b) {
  return apply1("tessel.matmul", {a, b}, [](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "tessel.matmul");
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
    return build::reshape(t, r, out);
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
  return apply1("lax.dot_general", {a, b}, [d](NodeTable& t, const NR& in) {
    auto [x, y] = operands(t, in[0], in[1], "lax.dot_general");
    return build::dot_general(t, x, y, DotDims{d.lhs_contracting, d.rhs_contracting, d.lhs_batch, d.rhs_batch});
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

Array einsum(const std::string& spec_in, const std::vector<Array>& operands_in) {
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
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != operands_in.size())
    throw ValueError("einsum: " + std::to_string(terms.size()) + " terms in '" + spec_in + "' for " +
                     std::to_string(operands_in.size()) + " operands");
  std::string out;
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
  return apply1("tessel.einsum", operands_in, [terms, out](NodeTable& t, const NR& in) {
    std::vector<NodeRef> xs = in;
    std::vector<std::string> labels = terms;
    for (size_t k = 0; k < xs.size(); ++k) xs[k] = diagonal_labels(t, xs[k], labels[k]);
    // Contract left to right.
    NodeRef acc = xs[0];
    std::string al = labels[0];
    for (size_t k = 1; k <= xs.size(); ++k) {
      // Labels needed later: the output and the operands still to come.
      std::string later = out;
      for (size_t m = k; m < xs.size(); ++m) later += labels[m];
      if (k == xs.size()) {
        acc = sum_labels(t, acc, al, later);
        break;
      }
      NodeRef b = xs[k];
      std::string bl = labels[k];
      acc = sum_labels(t, acc, al, later + bl);
      b = sum_labels(t, b, bl, later + al);
      auto [x, y] = operands(t, acc, b, "tessel.einsum");
      DotDims d;
      std::string res;
      for (size_t i = 0; i < al.size(); ++i) {
        size_t j = bl.find(al[i]);
        if (j == std::string::npos) continue;
        if (later.find(al[i]) != std::string::npos) d.lhs_batch.push_back(std::int64_t(i)), d.rhs_batch.push_back(std::int64_t(j));
        else d.lhs_contract.push_back(std::int64_t(i)), d.rhs_contract.push_back(std::int64_t(j));
      }
      for (auto i : d.lhs_batch) res += al[i];
      for (size_t i = 0; i < al.size(); ++i)
        if (bl.find(al[i]) == std::string::npos) res += al[i];
      for (size_t j = 0; j < bl.size(); ++j)
        if (al.find(bl[j]) == std::string::npos) res += bl[j];
      for (size_t i = 0; i < d.lhs_batch.size(); ++i)
        if (x->shape()[d.lhs_batch[i]] != y->shape()[d.rhs_batch[i]])
          throw ShapeError(cat("einsum: label '", res[i], "' has size ", x->shape()[d.lhs_batch[i]], " in one operand (",
                               shape_str(x->shape()), ") and ", y->shape()[d.rhs_batch[i]], " in another (",
                               shape_str(y->shape()), ")"));
      acc = build::dot_general(t, x, y, d);
      al = res;
    }
    // Order the remaining labels as the output asks.
    std::vector<std::int64_t> perm;
    for (char ch : out) {
      auto p = al.find(ch);
      if (p == std::string::npos) throw ValueError(std::string("einsum: output label '") + ch + "' is in no operand");
      perm.push_back(std::int64_t(p));
    }
    return build::transpose(t, acc, perm);
  });
}

}  // namespace tessel
