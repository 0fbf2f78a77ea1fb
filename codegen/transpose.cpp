#include "codegen/transpose.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "codegen/host.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

void transpose16x16_f32_avx512(const float* src, std::int64_t lds, float* dst, std::int64_t ldd);
void transpose8x8_f64_avx512(const double* src, std::int64_t lds, double* dst, std::int64_t ldd);

namespace {

using i64 = std::int64_t;

bool use_avx512() {
  static const bool yes = !avx512_disabled() && host_cpu().has("avx512f");
  return yes;
}

// A square block of B x B elements through a buffer in registers or L1:
// each of its B source rows read whole, each of its B result rows written
// whole. B: a line of the element type (16 float32s), at least 8.
template <class T>
void block_portable(const T* src, i64 lds, T* dst, i64 ldd) {
  constexpr i64 B = std::max<i64>(8, 64 / i64(sizeof(T)));
  T b[B][B];
  for (i64 i = 0; i < B; ++i)
    for (i64 j = 0; j < B; ++j) b[j][i] = src[i * lds + j];
  for (i64 j = 0; j < B; ++j) std::memcpy(dst + j * ldd, b[j], sizeof(b[j]));
}

template <class T>
void transpose_typed(const T* src, i64 rows, i64 cols, i64 lds, T* dst, i64 ldd) {
  constexpr i64 B = std::max<i64>(8, 64 / i64(sizeof(T)));
  auto block = [&](const T* s, T* d) {
    if constexpr (sizeof(T) == 4) {
      if (use_avx512()) return transpose16x16_f32_avx512(reinterpret_cast<const float*>(s), lds, reinterpret_cast<float*>(d), ldd);
    } else if constexpr (sizeof(T) == 8) {
      if (use_avx512()) return transpose8x8_f64_avx512(reinterpret_cast<const double*>(s), lds, reinterpret_cast<double*>(d), ldd);
    }
    block_portable(s, lds, d, ldd);
  };
  // Strips of B source rows, read left to right (B streams), each block's
  // B result rows a line each.
  const i64 full_r = rows / B * B, full_c = cols / B * B;
  for (i64 r0 = 0; r0 < full_r; r0 += B) {
    for (i64 c0 = 0; c0 < full_c; c0 += B) block(src + r0 * lds + c0, dst + c0 * ldd + r0);
    for (i64 c = full_c; c < cols; ++c)
      for (i64 r = r0; r < r0 + B; ++r) dst[c * ldd + r] = src[r * lds + c];
  }
  for (i64 r = full_r; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// The transpose with runs of result dims that are also consecutive, in
// order, in the operand merged into one dim: (n/8, 8, n) by {2, 0, 1} is a
// 2-D (4096, n) by {1, 0}. xs: the operand's merged shape.
struct Merged {
  Shape xs;
  std::vector<std::int64_t> perm;
};
Merged merged(const Node& n) {
  const auto& perm = n.attr<attr::Dimensions>().dims;
  const Shape& xs = n.in[0]->shape();
  // Size-1 dims move nothing: dropped, the others renumbered.
  std::vector<std::int64_t> renumbered(xs.size(), -1), p;
  Shape sizes;
  for (std::size_t d = 0; d < xs.size(); ++d)
    if (xs[d] != 1) renumbered[d] = std::int64_t(sizes.size()), sizes.push_back(xs[d]);
  for (auto d : perm)
    if (renumbered[std::size_t(d)] >= 0) p.push_back(renumbered[std::size_t(d)]);
  // Runs of result dims whose operand dims follow each other: [first, last].
  std::vector<std::pair<std::int64_t, std::int64_t>> groups;
  for (auto d : p) {
    if (!groups.empty() && d == groups.back().second + 1) groups.back().second = d;
    else groups.push_back({d, d});
  }
  std::vector<std::size_t> order(groups.size());
  for (std::size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return groups[a].first < groups[b].first; });
  Merged m;
  m.perm.assign(groups.size(), 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    std::int64_t size = 1;
    for (auto d = groups[order[k]].first; d <= groups[order[k]].second; ++d) size *= sizes[std::size_t(d)];
    m.xs.push_back(size);
    m.perm[order[k]] = std::int64_t(k);
  }
  return m;
}

// The result's dims as (outer..., p, last): p is the result dim reading the
// operand's last; per index of the outer dims, a 2-D transpose of the
// operand's (perm[last] x last) plane into the result's (p x last).
struct Plan {
  Shape outer;                             // the result's dims but p and its last
  std::vector<i64> outer_src, outer_dst;   // their strides in the operand and the result
  i64 rows = 0, cols = 0, lds = 0, ldd = 0;  // the plane: rows = result's last dim, cols = result's p
  int esize = 0;
};

Plan plan_of(const Node& n) {
  const Merged m = merged(n);
  const auto& perm = m.perm;
  const Shape& xs = m.xs;
  Shape s;
  for (auto d : perm) s.push_back(xs[std::size_t(d)]);
  const int r = int(s.size());
  std::vector<i64> xstride(std::size_t(r), 1), ostride(std::size_t(r), 1);
  for (int d = r - 2; d >= 0; --d) {
    xstride[std::size_t(d)] = xstride[std::size_t(d + 1)] * xs[std::size_t(d + 1)];
    ostride[std::size_t(d)] = ostride[std::size_t(d + 1)] * s[std::size_t(d + 1)];
  }
  int p = 0;
  while (perm[std::size_t(p)] != r - 1) ++p;
  Plan pl;
  for (int d = 0; d < r - 1; ++d)
    if (d != p) {
      pl.outer.push_back(s[std::size_t(d)]);
      pl.outer_src.push_back(xstride[std::size_t(perm[std::size_t(d)])]);
      pl.outer_dst.push_back(ostride[std::size_t(d)]);
    }
  pl.rows = s.back();
  pl.cols = s[std::size_t(p)];
  pl.lds = xstride[std::size_t(perm[std::size_t(r - 1)])];
  pl.ldd = ostride[std::size_t(p)];
  pl.esize = int(dtype_size(n.dtype()));
  return pl;
}

class TransposeThunk final : public rt::Thunk {
 public:
  TransposeThunk(const Node& n, int in, int out) : plan_(plan_of(n)), in_(in), out_(out) {
    std::ostringstream os;
    os << "transpose " << n.aval.str() << " of " << n.in[0]->aval.str() << " by blocks";
    text_ = os.str();
  }
  void run(rt::ExecContext& ctx) const override {
    const Plan& p = plan_;
    const auto* src = static_cast<const char*>(ctx.slots[std::size_t(in_)]);
    auto* dst = static_cast<char*>(ctx.slots[std::size_t(out_)]);
    // Items: per outer index, strips of kStrip operand rows.
    const i64 strips = (p.rows + kStrip - 1) / kStrip, outer = numel(p.outer);
    auto chunk = [&](i64 b, i64 e) {
      for (i64 item = b; item < e; ++item) {
        i64 o = item / strips, r0 = item % strips * kStrip, so = 0, dof = 0;
        for (int d = int(p.outer.size()) - 1; d >= 0; --d) {
          const i64 k = o % p.outer[std::size_t(d)];
          o /= p.outer[std::size_t(d)];
          so += k * p.outer_src[std::size_t(d)];
          dof += k * p.outer_dst[std::size_t(d)];
        }
        const i64 h = std::min(kStrip, p.rows - r0);
        transpose_block(src + (so + r0 * p.lds) * p.esize, h, p.cols, p.lds, dst + (dof + r0) * p.esize, p.ldd, p.esize);
      }
    };
    const i64 grain = std::max<i64>(1, 32768 / std::max<i64>(1, kStrip * p.cols));
    rt::parallel_for(ctx, 0, outer * strips, grain, chunk);
  }
  std::string describe() const override { return text_; }
  bool pure() const override { return true; }
  std::int64_t work() const override { return numel(plan_.outer) * plan_.rows * plan_.cols; }
  rt::ComputeSlot::Width width() const override { return rt::width_for_work(work()); }

 private:
  static constexpr i64 kStrip = 64;  // operand rows per item: whole blocks of every element size
  Plan plan_;
  int in_, out_;
  std::string text_;
};

}  // namespace

void transpose_block(const void* src, std::int64_t rows, std::int64_t cols, std::int64_t lds, void* dst,
                     std::int64_t ldd, int esize) {
  switch (esize) {
    case 1: return transpose_typed(static_cast<const std::uint8_t*>(src), rows, cols, lds, static_cast<std::uint8_t*>(dst), ldd);
    case 2: return transpose_typed(static_cast<const std::uint16_t*>(src), rows, cols, lds, static_cast<std::uint16_t*>(dst), ldd);
    case 4: return transpose_typed(static_cast<const std::uint32_t*>(src), rows, cols, lds, static_cast<std::uint32_t*>(dst), ldd);
    case 8: return transpose_typed(static_cast<const std::uint64_t*>(src), rows, cols, lds, static_cast<std::uint64_t*>(dst), ldd);
    default: throw InternalError("transpose_block of " + std::to_string(esize) + "-byte elements");
  }
}

bool transposes_by_blocks(const Node& n) {
  if (n.op != Op::transpose || n.aval.tuple || numel(n.shape()) < kTiledTransposeElements) return false;
  const std::size_t e = dtype_size(n.dtype());
  if (e != 1 && e != 2 && e != 4 && e != 8) return false;
  const Merged m = merged(n);
  const auto& perm = m.perm;
  const Shape& xs = m.xs;
  const int r = int(perm.size());
  if (r < 2 || perm.back() == r - 1) return false;
  i64 stride = 1;
  for (int d = int(perm.back()) + 1; d < r; ++d) stride *= xs[std::size_t(d)];
  return stride * i64(e) >= 64 && xs.back() >= 8;
}

std::unique_ptr<rt::Thunk> make_transpose_thunk(const Node& n, int in, int out) {
  return std::make_unique<TransposeThunk>(n, in, out);
}

}  // namespace tessel::codegen
