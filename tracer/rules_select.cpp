// Rules of top_k (lax.top_k): the k largest elements along the last dim,
// descending (NaNs largest, as a descending sort puts them first), ties by
// the lower index, and their int32 indices; a tuple (values, indices).
//
// Split over devices along the last dim, each device takes the top k of its
// own block (padding never chosen before a real element), the k candidates
// of every block and their global indices are all-gathered (k values per
// device and line, never the array), and every device takes the top k of
// the candidates: blocks are gathered in order, so ties still go to the
// lower global index.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

void top_k_lines(DType dtype, const Shape& s, std::int64_t k, const void* in, void* values, void* indices) {
  const std::int64_t n = s.empty() ? 1 : s.back();
  const std::int64_t lines = n ? numel(s) / n : 0;
  visit_wide_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
      throw InternalError("top_k of complex or boolean values");
    } else {
      const T* x = static_cast<const T*>(in);
      T* v = static_cast<T*>(values);
      std::int32_t* ix = static_cast<std::int32_t*>(indices);
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      // a before b: larger first, NaN largest, then the lower index.
      auto before = [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(a)) return !std::isnan(b);
          if (std::isnan(b)) return false;
        }
        return a > b;
      };
      for (std::int64_t l = 0; l < lines; ++l) {
        const T* line = x + l * n;
        std::iota(order.begin(), order.end(), std::int64_t(0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t a, std::int64_t b) {
          if (before(line[a], line[b])) return true;
          if (before(line[b], line[a])) return false;
          return a < b;
        });
        for (std::int64_t i = 0; i < k; ++i) {
          v[l * k + i] = line[order[std::size_t(i)]];
          ix[l * k + i] = std::int32_t(order[std::size_t(i)]);
        }
      }
    }
  });
}

Aval Rule<Op::top_k>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::top_k, in, 1);
  const Aval& x = in[0];
  if (x.shape.empty()) throw ShapeError(cat("top_k needs an operand of rank >= 1, got ", avals_str(in)));
  if (is_complex(x.dtype) || x.dtype == DType::bool_)
    throw TypeError(cat("top_k: complex numbers are unordered and booleans are not numbers here, got ", avals_str(in)));
  if (p.k < 0 || p.k > x.shape.back())
    throw ValueError(cat("top_k: k = ", p.k, " must be in [0, ", x.shape.back(), "] for ", avals_str(in)));
  Shape s = x.shape;
  s.back() = p.k;
  return Aval::make_tuple({Aval{x.dtype, s, false}, Aval{DType::int32, s, false}});
}
void Rule<Op::top_k>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  HostArray v, i;
  rule_util::allocate(v, aval.elements[0]);
  rule_util::allocate(i, aval.elements[1]);
  top_k_lines(in[0]->dtype, in[0]->shape, p.k, in[0]->bytes.data(), v.bytes.data(), i.bytes.data());
  rule_util::pack_tuple(out, {&v, &i});
}
// The leading dims shared; the operand's last dim a factor of its own (the
// partition rule combines its blocks), the results' k a whole factor.
FactorRule Rule<Op::top_k>::factors(const Node& n) {
  FactorRule r;
  const Shape& s = n.in[0]->shape();
  std::vector<std::vector<int>> in, out;
  for (std::size_t d = 0; d + 1 < s.size(); ++d) {
    const int f = r.add_factor(s[d]);
    in.push_back({f});
    out.push_back({f});
  }
  in.push_back({r.add_factor(s.back())});
  out.push_back({r.add_factor(attrs_of(n).k, false, true)});
  r.operands = {in};
  r.results = {out, out};
  return r;
}
NodeRef Rule<Op::top_k>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                             const NodeRef& y) {
  if (!tx[0]) return nullptr;
  NodeRef idx = build::get_tuple_element(t, y, 1);
  attr::Indexed how;
  how.axis = n.in[0]->rank() - 1;
  how.along = true;
  how.mode = attr::IndexMode::clip;
  return build::tuple(t, {build::gather(t, tx[0], idx, how), ad::zeros_like(t, idx)});
}
void Rule<Op::top_k>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::top_k>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                               const BatchInfo&) {
  return build::top_k(t, x[0], attrs_of(n).k);  // the batch dim leads; the last dim stays last
}
NodeRef Rule<Op::top_k>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                               const std::vector<AxisSharding>& op_sh, const AxisSharding&) {
  NodeTable& t = b.table();
  const std::int64_t k = attrs_of(n).k;
  const int last = n.in[0]->rank() - 1;
  const std::vector<int>& axes = op_sh[0].dims[std::size_t(last)];
  NodeRef x = ops[0];
  if (axes.empty() || b.tiles(axes) == 1) return build::top_k(t, x, k);
  const Shape tile = x->shape();
  const std::int64_t len = tile.back();
  // Padding (global positions past the end) is the lowest value: chosen last, after any real element.
  x = b.mask(x, n.in[0]->shape(), op_sh[0], {last}, reduction_identity(Op::reduce_max, x->dtype()));
  const std::int64_t kk = std::min(k, len);
  NodeRef local = build::top_k(t, x, kk);
  NodeRef vals = build::get_tuple_element(t, local, 0), idx = build::get_tuple_element(t, local, 1);
  Shape ks = tile;
  ks.back() = kk;
  idx = build::binary(t, Op::add, idx, build::broadcast_in_dim(t, b.offset(axes, len), ks, {}));
  NodeRef all_v = build::all_gather(t, vals, b.device_mesh(), axes, last);
  NodeRef all_i = build::all_gather(t, idx, b.device_mesh(), axes, last);
  NodeRef best = build::top_k(t, all_v, k);
  attr::Indexed how;
  how.axis = last;
  how.along = true;
  how.mode = attr::IndexMode::clip;
  NodeRef chosen = build::gather(t, all_i, build::get_tuple_element(t, best, 1), how);
  return build::tuple(t, {build::get_tuple_element(t, best, 0), chosen});
}

// ------------------------------------------------------------------ complex expansion, cost

TESSEL_COMPLEX_NONE(top_k)
TESSEL_COST(top_k, memory_cost)

}  // namespace tessel
