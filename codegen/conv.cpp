#include "codegen/conv.hpp"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "codegen/library.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

using detail::cat;
using MemDims = dnnl::memory::dims;

// oneDNN plans and runs with one thread while this lives (the calling
// thread's OpenMP setting, restored after): never a team of its own.
class OneThread {
 public:
  OneThread() : prev_(omp_get_max_threads()) {
    if (prev_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (prev_ != 1) omp_set_num_threads(prev_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int prev_;
};

dnnl::engine& engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // outlives threads still running at exit
  return *e;
}

std::int64_t dilate_dim(std::int64_t d, std::int64_t k) { return d == 0 ? 0 : 1 + k * (d - 1); }

// oneDNN's scratchpad for the blocks one thread runs (scratchpad_mode::user:
// every call brings its own), aligned as its kernels' stores need.
class Scratchpad {
 public:
  dnnl::memory of(const dnnl::memory::desc& md, std::size_t bytes) {
    lines_.resize((bytes + 63) / 64);
    return dnnl::memory(md, engine(), lines_.empty() ? nullptr : lines_.data());
  }

 private:
  struct alignas(64) Line {
    char b[64];
  };
  std::vector<Line> lines_;
};

// The primitive of block b of n: the full blocks', or the last one's when smaller.
template <class Prim>
const Prim& block_prim(const std::vector<Prim>& prims, std::int64_t b, std::int64_t n) {
  return b + 1 == n && prims.size() > 1 ? prims[1] : prims[0];
}

// Blocks the batch is cut into (fewer when the batch is smaller), and the
// work below which one block does it all.
constexpr std::int64_t kBlocks = 16;
constexpr double kParallelFlops = double(1 << 22);
constexpr double kMachineWideFlops = 2.0 * 512 * 512 * 512;  // as a dot's (codegen/dot.cpp)
// Batches of at most kChunkedBatch images are cut into chunks of at least
// kChunkRows output rows too (smaller chunks run oneDNN's kernels less
// well: 4 images in 16 chunks of 14 rows took 8% longer than in 4 blocks);
// such a plan takes every idle core from kChunkedMachineWideFlops on (one
// 56x56x64 image's 3x3 layer, 0.23 GFLOP, ran on one core).
constexpr std::int64_t kChunkedBatch = 2, kChunkRows = 8;
constexpr double kChunkedMachineWideFlops = double(1 << 25);
// A kernel gradient's chunks each write a partial gradient, added after,
// and oneDNN's backward-weights kernels pay more per call: its chunks are
// larger. One 56x56x64 image's 3x3 kernel gradient on 2 cores: 1.21 ms
// whole, 0.92-0.97 in chunks of 8 rows, 0.79-0.81 of 14, 0.76-0.78 of 28
// (two images: 1.29-1.37 whole, 1.36-1.44 in chunks of 14).
constexpr std::int64_t kWeightsChunkRows = 14;

// A small batch's sum cut along the first spatial dim: `rows` rows of the
// sum's outer index (the result's for the forward, the cotangent's for the
// kernel's gradient) in chunks of `per`, each a convolution of the input
// rows it reads (a window of span + 1 rows stepping by `step` from row
// -pad_lo, of H), padded only where the image's pad lies at its edges.
// Chunk c's kind is kinds[kind[c]]; its rows start at out[c], its input
// rows at in[c].
struct RowChunks {
  struct Kind {
    std::int64_t rows, in_rows, top, bottom;
    bool operator==(const Kind&) const = default;
  };
  std::int64_t count = 1, per = 0;
  std::vector<std::int64_t> out, in;
  std::vector<std::size_t> kind;
  std::vector<Kind> kinds;
  void add(const Kind& q, std::int64_t first, std::int64_t in0) {
    auto it = std::find(kinds.begin(), kinds.end(), q);
    kind.push_back(std::size_t(it - kinds.begin()));
    if (it == kinds.end()) kinds.push_back(q);
    out.push_back(first);
    in.push_back(in0);
  }
};

// Chunks for `batch` images of `rows` rows when the work is worth it
// (none: run whole images).
std::optional<RowChunks> cut_rows(std::int64_t batch, double flops, std::int64_t rows, std::int64_t H, std::int64_t step,
                                  std::int64_t span, std::int64_t pad_lo, std::int64_t min_rows = kChunkRows) {
  if (batch <= 0 || batch > kChunkedBatch || flops < kParallelFlops || rows < 2 * min_rows) return std::nullopt;
  const std::int64_t want = std::min(rows / min_rows, (kBlocks + batch - 1) / batch);
  RowChunks r;
  r.per = (rows + want - 1) / want;
  r.count = (rows + r.per - 1) / r.per;
  if (r.count < 2) return std::nullopt;
  for (std::int64_t c = 0; c < r.count; ++c) {
    const std::int64_t y0 = c * r.per, y1 = std::min(rows, y0 + r.per);
    const std::int64_t first = y0 * step - pad_lo, last = (y1 - 1) * step + span - pad_lo;
    const std::int64_t in0 = std::max<std::int64_t>(first, 0), in1 = std::min(last, H - 1);
    if (in1 < in0) return std::nullopt;  // a chunk of pad rows only
    const RowChunks::Kind kind{y1 - y0, in1 - in0 + 1, in0 - first, last - in1};
    r.add(kind, y0, in0);
  }
  return r;
}

// Chunks of an input gradient's result (oneDNN's diff_src): `rows` rows,
// each receiving from the cotangent's rows o (of H) with
// o * step - pad_lo + tap * dil in it (taps < K). Chunks after the first
// start where (row + pad_lo) is a multiple of the step, so that each
// chunk's low pad (pad_lo + its first row - step * its first cotangent row)
// is what the step leaves.
std::optional<RowChunks> cut_result_rows(std::int64_t batch, double flops, std::int64_t rows, std::int64_t H,
                                         std::int64_t step, std::int64_t K, std::int64_t dil, std::int64_t pad_lo) {
  if (batch <= 0 || batch > kChunkedBatch || flops < kParallelFlops || rows < 2 * kChunkRows || pad_lo < 0)
    return std::nullopt;
  const std::int64_t want = std::min(rows / kChunkRows, (kBlocks + batch - 1) / batch);
  RowChunks r;
  r.per = ((rows + want - 1) / want + step - 1) / step * step;
  const std::int64_t shift = (step - pad_lo % step) % step;
  std::vector<std::int64_t> at{0};
  for (std::int64_t b = r.per + shift; b < rows; b += r.per) at.push_back(b);
  at.push_back(rows);
  r.count = std::int64_t(at.size()) - 1;
  if (r.count < 2) return std::nullopt;
  for (std::int64_t c = 0; c < r.count; ++c) {
    const std::int64_t r0 = at[std::size_t(c)], r1 = at[std::size_t(c) + 1];
    const std::int64_t lo = r0 + pad_lo - (K - 1) * dil;
    const std::int64_t o0 = std::max<std::int64_t>(0, lo <= 0 ? 0 : (lo + step - 1) / step);
    const std::int64_t o1 = std::min(H - 1, (r1 - 1 + pad_lo) / step);
    if (o1 < o0) return std::nullopt;  // a chunk no cotangent row reaches
    const std::int64_t top = pad_lo + r0 - o0 * step;
    const std::int64_t bottom = (o1 - o0) * step + (K - 1) * dil + 1 - (r1 - r0) - top;
    if (top < 0) return std::nullopt;
    r.add({r1 - r0, o1 - o0 + 1, top, bottom}, r0, o0);
  }
  return r;
}

// A conv node in the canonical order: input (N, C, S...), kernel (O, I,
// K...), result (N / B, O, S_out...), with each operand's element strides.
struct Geometry {
  attr::Conv p;
  DType dtype = DType::float32;    // the result's
  DType operand = DType::float32;  // the operands' (bfloat16 into float32: a mixed convolution)
  std::int64_t N = 0, C = 0, O = 0, I = 0, G = 1, B = 1;
  Shape in, kernel, out;
  std::vector<std::int64_t> xs, ws, zs;
  double flops = 0;
  // Nothing to sum (no input features, taps or input elements): zeros.
  bool empty_sum = false;

  explicit Geometry(const Node& n) : p(n.attr<attr::Conv>()), dtype(n.dtype()), operand(n.in[0]->dtype()) {
    const Shape &a = n.in[0]->shape(), &b = n.in[1]->shape(), &o = n.shape();
    const auto as = row_major_strides(a), bs = row_major_strides(b), os = row_major_strides(o);
    N = a[std::size_t(p.lhs_spec[0])];
    C = a[std::size_t(p.lhs_spec[1])];
    O = b[std::size_t(p.rhs_spec[0])];
    I = b[std::size_t(p.rhs_spec[1])];
    G = p.feature_group_count;
    B = p.batch_group_count;
    for (std::size_t j = 0; j < a.size(); ++j) {
      xs.push_back(as[std::size_t(p.lhs_spec[j])]);
      ws.push_back(bs[std::size_t(p.rhs_spec[j])]);
      zs.push_back(os[std::size_t(p.out_spec[j])]);
      if (j >= 2) {
        in.push_back(a[std::size_t(p.lhs_spec[j])]);
        kernel.push_back(b[std::size_t(p.rhs_spec[j])]);
        out.push_back(o[std::size_t(p.out_spec[j])]);
      }
    }
    empty_sum = I == 0 || numel(in) == 0 || numel(kernel) == 0;
    flops = 2 * double(numel(o)) * double(I) * double(numel(kernel));
  }
  std::size_t rank() const { return in.size(); }
};

// oneDNN's forward convolution for f32 with 1-3 spatial dims. Batch groups
// (a grouped convolution's kernel gradient) run as one convolution per
// group: its share of the batch, of the kernel's output features and of the
// result's features, at offsets into the same arrays. The input goes to oneDNN as it lies (its strides), unless it has
// an input dilation or a negative pad: then it is dilated and padded into
// the workspace first (dense, channels last) and oneDNN pads nothing.
struct OneDnnPlan {
  bool prepared = false;
  Shape prep;  // the prepared input's spatial extents
  std::int64_t mb = 1, blocks = 1, tail = 1;
  struct Prim {
    dnnl::convolution_forward conv;
    dnnl::memory::desc src, dst, scratch_md, wei_user, wei;
    std::optional<dnnl::reorder> reorder;  // the kernel into its layout, where this kind reorders it
    bool reordered = false;                // it reads the kernel reordered (by it or an earlier kind)
    std::size_t wei_offset = 0, wei_bytes = 0;  // of the reordered kernel(s) in the workspace
    std::size_t scratch = 0;
  };
  std::vector<Prim> prims;  // the full blocks', and the last block's when smaller; or one per kind of row chunk
  // A small batch is cut along the first spatial dim's output rows too:
  // block b is image b / row_chunks, chunk b % row_chunks, whose rows start
  // at chunk_out[chunk] (and its input rows at chunk_in[chunk]), run by
  // prims[chunk_prim[chunk]].
  std::int64_t row_chunks = 1, chunk_rows = 0;
  std::vector<std::int64_t> chunk_out, chunk_in;
  std::vector<std::size_t> chunk_prim;
  std::size_t prep_bytes = 0, workspace = 0;
  std::string impl;
};

std::optional<OneDnnPlan> plan_onednn(const Geometry& g) {
  const std::size_t k = g.rank();
  if (g.dtype != DType::float32 || k < 1 || k > 3 || g.empty_sum) return std::nullopt;
  const bool bf16 = g.operand == DType::bfloat16;
  if (!bf16 && g.operand != DType::float32) return std::nullopt;
  const std::int64_t Nb = g.N / g.B, Ob = g.O / g.B;  // one batch group's
  OneDnnPlan plan;
  for (std::size_t j = 0; j < k; ++j)
    if (g.p.lhs_dilation[j] != 1 || g.p.pad_lo[j] < 0 || g.p.pad_hi[j] < 0) plan.prepared = true;
  if (bf16 && plan.prepared) return std::nullopt;  // the prepared input is float32
  MemDims src_strides, pad_l, pad_r, strides, dilates;
  if (plan.prepared) {
    std::int64_t sp = 1;
    for (std::size_t j = 0; j < k; ++j) {
      plan.prep.push_back(dilate_dim(g.in[j], g.p.lhs_dilation[j]) + g.p.pad_lo[j] + g.p.pad_hi[j]);
      sp *= plan.prep.back();
    }
    // (N, C, S'...) dims over a dense (N, S'..., C) buffer.
    src_strides = {sp * g.C, 1};
    for (std::size_t j = 0; j < k; ++j) {
      std::int64_t s = g.C;
      for (std::size_t i = j + 1; i < k; ++i) s *= plan.prep[i];
      src_strides.push_back(s);
    }
    plan.prep_bytes = (std::size_t(g.N * sp * g.C) * sizeof(float) + 63) / 64 * 64;  // the kernels follow, aligned
  } else {
    src_strides.assign(g.xs.begin(), g.xs.end());
  }
  for (std::size_t j = 0; j < k; ++j) {
    pad_l.push_back(plan.prepared ? 0 : g.p.pad_lo[j]);
    pad_r.push_back(plan.prepared ? 0 : g.p.pad_hi[j]);
    strides.push_back(g.p.strides[j]);
    dilates.push_back(g.p.rhs_dilation[j] - 1);
  }
  // Blocks of the batch: a fixed function of the shape.
  plan.blocks = g.flops < kParallelFlops || Nb == 0 ? 1 : std::min(Nb, kBlocks);
  plan.mb = std::max<std::int64_t>(1, (Nb + plan.blocks - 1) / plan.blocks);
  plan.blocks = std::max<std::int64_t>(1, (Nb + plan.mb - 1) / plan.mb);
  plan.tail = Nb - (plan.blocks - 1) * plan.mb;
  // The kinds of block: (batch, out rows, in rows, pad top, pad bottom).
  struct Kind {
    std::int64_t batch, out_rows, in_rows, top, bottom;
    bool operator==(const Kind&) const = default;
  };
  std::vector<Kind> kinds;
  // A batch too small to give each of kBlocks blocks an image (inference
  // on one image) is cut along the first spatial dim's output rows as well:
  // each chunk a convolution of the input rows it reads, padded only where
  // the image's pad lies at its edges. Every chunk reads at least one row.
  const std::int64_t H = plan.prepared ? plan.prep[0] : g.in[0], rows = g.out[0];
  // Only where rows are outermost in an image, input and result (channels
  // last: NHWC, or the prepared input): a chunk is then a dense image of
  // fewer rows, which oneDNN's fast kernels take (a chunk of NCHW rows took
  // its reference kernel, 400x slower).
  const bool rows_outer = src_strides[2] * H == src_strides[0] && g.zs[2] * rows == g.zs[0];
  const auto chunks = rows_outer && g.B == 1 ? cut_rows(Nb, g.flops, rows, H, g.p.strides[0],
                                                      (g.kernel[0] - 1) * g.p.rhs_dilation[0], pad_l[0])
                                             : std::nullopt;
  if (chunks) {
    plan.row_chunks = chunks->count;
    plan.chunk_rows = chunks->per;
    plan.blocks = Nb * chunks->count;
    plan.mb = plan.tail = 1;
    plan.chunk_in = chunks->in;
    plan.chunk_out = chunks->out;
    plan.chunk_prim = chunks->kind;
    for (const auto& q : chunks->kinds) kinds.push_back({1, q.rows, q.in_rows, q.top, q.bottom});
  }
  if (plan.row_chunks == 1) {
    kinds.push_back({plan.mb, rows, H, pad_l[0], pad_r[0]});
    if (plan.tail != plan.mb) kinds.push_back({plan.tail, rows, H, pad_l[0], pad_r[0]});
  }
  MemDims wdims, wstrides;
  if (g.G > 1) {
    wdims = {g.G, g.O / g.G, g.I};
    wstrides = {g.O / g.G * g.ws[0], g.ws[0], g.ws[1]};
  } else {
    wdims = {Ob, g.I};
    wstrides = {g.ws[0], g.ws[1]};
  }
  for (std::size_t j = 0; j < k; ++j) wdims.push_back(g.kernel[j]), wstrides.push_back(g.ws[2 + j]);
  using dt = dnnl::memory::data_type;
  OneThread one;
  try {
    for (const Kind& kind : kinds) {
      const std::int64_t batch = kind.batch;
      MemDims sdims{batch, g.C}, ddims{batch, Ob};
      for (std::size_t j = 0; j < k; ++j) {
        sdims.push_back(j == 0 ? kind.in_rows : plan.prepared ? plan.prep[j] : g.in[j]);
        ddims.push_back(j == 0 ? kind.out_rows : g.out[j]);
      }
      pad_l[0] = kind.top;
      pad_r[0] = kind.bottom;
      MemDims sstrides = src_strides, dstrides(g.zs.begin(), g.zs.end());
      if (plan.row_chunks > 1) {  // a dense image of its rows
        sstrides[0] = kind.in_rows * sstrides[2];
        dstrides[0] = kind.out_rows * dstrides[2];
      }
      const dt in_dt = bf16 ? dt::bf16 : dt::f32;
      dnnl::memory::desc src(sdims, in_dt, sstrides), dst(ddims, dt::f32, dstrides);
      dnnl::memory::desc wei_user(wdims, in_dt, wstrides), wei_any(wdims, in_dt, dnnl::memory::format_tag::any);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        wei_any, dst, strides, dilates, pad_l, pad_r);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
      OneDnnPlan::Prim prim{.conv = dnnl::convolution_forward(pd), .src = src, .dst = dst,
                            .scratch_md = pd.scratchpad_desc(), .wei_user = wei_user, .wei = pd.weights_desc(),
                            .scratch = pd.scratchpad_desc().get_size()};
      const auto same_kernel = std::find_if(plan.prims.begin(), plan.prims.end(), [&](const OneDnnPlan::Prim& q) {
        return q.reordered && q.wei == prim.wei;
      });
      if (prim.wei != wei_user && same_kernel != plan.prims.end()) {
        // The kernel as an earlier block kind's primitive takes it: reordered once.
        prim.reordered = true;
        prim.wei_offset = same_kernel->wei_offset;
        prim.wei_bytes = same_kernel->wei_bytes;
      } else if (prim.wei != wei_user) {
        dnnl::reorder::primitive_desc rpd(engine(), wei_user, engine(), prim.wei);
        prim.reorder = dnnl::reorder(rpd);
        prim.reordered = true;
        prim.wei_offset = plan.prep_bytes + plan.workspace;
        prim.wei_bytes = (prim.wei.get_size() + 63) / 64 * 64;  // per batch group
        plan.workspace += prim.wei_bytes * std::size_t(g.B);
      }
      if (plan.impl.empty()) plan.impl = pd.impl_info_str();
      plan.prims.push_back(std::move(prim));
    }
  } catch (const dnnl::error&) {
    return std::nullopt;  // a convolution oneDNN has no implementation for: tessel's loops
  }
  plan.workspace += plan.prep_bytes;
  return plan;
}

// The gradient forms. JAX's transposes make a convolution's gradients
// forward convolutions that oneDNN's forward primitive runs slowly: the
// input's gradient dilates the cotangent by the strides (lhs_dilation), the
// kernel's takes the cotangent as a kernel as large as the image. Both are
// recognised here and run as oneDNN's backward primitives, which compute
// the same sums: backward-data with the kernel reversed and its features
// swapped; backward-weights with the input's batch and features swapped.
enum class Form { backward_data, backward_weights };

struct GradPlan {
  Form form = Form::backward_data;
  struct Prim {
    dnnl::primitive exec;
    // backward_data: diff_dst (the lhs), diff_src (the result); backward_weights:
    // src (the lhs), diff_dst (the rhs), diff_weights in oneDNN's layout and the result's.
    dnnl::memory::desc a, b, c, c_user, scratch_md;
    std::optional<dnnl::reorder> c_reorder;
    std::size_t scratch = 0, c_bytes = 0;
    std::int64_t size = 0;  // the block's batch: the result's (backward_data), the sum's (backward_weights)
  };
  std::vector<Prim> prims;  // the full blocks', and the last block's when smaller; or one per kind of row chunk
  std::int64_t per = 1, blocks = 1;
  // One or two images: block b is image b / row_chunks, chunk b %
  // row_chunks of the rows of the sum's outer index (backward_weights: the
  // cotangent's; backward_data: the result's) from chunk_out[chunk],
  // reading the other operand's rows from chunk_in[chunk], run by
  // prims[chunk_prim[chunk]].
  std::int64_t row_chunks = 1, chunk_rows = 0;
  std::vector<std::int64_t> chunk_out, chunk_in;
  std::vector<std::size_t> chunk_prim;
  // `images` images, each cut into c's chunks: a block each.
  void take(const RowChunks& c, std::int64_t images) {
    row_chunks = c.count;
    chunk_rows = c.per;
    blocks = images * c.count;
    per = 1;
    chunk_in = c.in;
    chunk_out = c.out;
    chunk_prim = c.kind;
  }
  dnnl::memory::desc plain, wei;  // backward_data: the reversed kernel, dense, and as oneDNN takes it
  std::optional<dnnl::reorder> wei_reorder;
  std::size_t plain_bytes = 0, c_offset = 0, workspace = 0;
  // backward_weights: the result's dims and strides (oneDNN's order), and
  // each block's dense partial sum (first in the workspace).
  MemDims result_dims, result_strides;
  std::size_t partial_bytes = 0;
  std::string impl;
};

std::size_t aligned64(std::size_t b) { return (b + 63) / 64 * 64; }

MemDims dense_strides(const MemDims& dims) {
  MemDims s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

void cut(GradPlan& plan, std::int64_t n, double flops, std::int64_t min_per) {
  plan.blocks = flops < kParallelFlops || n == 0 ? 1 : std::max<std::int64_t>(1, std::min(n / min_per, kBlocks));
  plan.per = std::max<std::int64_t>(1, (n + plan.blocks - 1) / plan.blocks);
  plan.blocks = std::max<std::int64_t>(1, (n + plan.per - 1) / plan.per);
}

// chunk: whether one or two images may be cut along rows (a plan whose
// chunks oneDNN cannot run in one kernel layout is made again whole).
std::optional<GradPlan> plan_backward(const Geometry& g, bool chunk = true) {
  const std::size_t k = g.rank();
  if (g.dtype != DType::float32 || k < 1 || k > 3 || g.empty_sum) return std::nullopt;
  if (g.operand != DType::float32 && g.operand != DType::bfloat16) return std::nullopt;
  bool dilated = false, unit_strides = true, undilated = true;
  for (std::size_t j = 0; j < k; ++j) {
    dilated = dilated || g.p.lhs_dilation[j] > 1;
    undilated = undilated && g.p.lhs_dilation[j] == 1;
    unit_strides = unit_strides && g.p.strides[j] == 1;
  }
  GradPlan plan;
  using dt = dnnl::memory::data_type;
  const auto any = dnnl::memory::format_tag::any;
  const dt in_dt = g.operand == DType::bfloat16 ? dt::bf16 : dt::f32;  // the operands'; the result float32
  MemDims st, dil, pl, pr;
  std::vector<RowChunks::Kind> row_kinds;  // backward_weights: the blocks' rows (cotangent, input, pads)
  if (dilated && unit_strides && g.B == 1) {
    // The input's gradient: result = backward_data(diff_dst = lhs, the
    // kernel reversed with its features swapped), strides the dilation.
    plan.form = Form::backward_data;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t s = g.p.lhs_dilation[j], d = g.p.rhs_dilation[j], K = g.kernel[j];
      const std::int64_t lo = (K - 1) * d - g.p.pad_lo[j];
      if (lo < 0) return std::nullopt;
      st.push_back(s), dil.push_back(d - 1), pl.push_back(lo);
      pr.push_back((g.in[j] - 1) * s + (K - 1) * d + 1 - g.out[j] - lo);
    }
    MemDims wd = g.G > 1 ? MemDims{g.G, g.I, g.O / g.G} : MemDims{g.I, g.O};
    for (auto K : g.kernel) wd.push_back(K);
    plan.plain = dnnl::memory::desc(wd, in_dt, dense_strides(wd));
    plan.plain_bytes = aligned64(plan.plain.get_size());
    cut(plan, g.N, g.flops, 1);
    // One or two images are cut along the result's rows too, where rows are
    // outermost in an image, cotangent and result (channels last).
    const bool rows_outer = g.xs[2] * g.in[0] == g.xs[0] && g.zs[2] * g.out[0] == g.zs[0];
    const auto chunks = chunk && rows_outer ? cut_result_rows(g.N, g.flops, g.out[0], g.in[0], st[0], g.kernel[0],
                                                              g.p.rhs_dilation[0], pl[0])
                                            : std::nullopt;
    if (chunks) {
      plan.take(*chunks, g.N);
      row_kinds = chunks->kinds;
    } else {
      row_kinds.push_back({g.out[0], g.in[0], pl[0], pr[0]});
    }
  } else if (undilated && g.G == 1 && numel(g.kernel) > numel(g.out)) {
    // The kernel's gradient: result = backward_weights(src = lhs with its
    // batch and features swapped, diff_dst = rhs likewise).
    plan.form = Form::backward_weights;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t s = g.p.rhs_dilation[j], d = g.p.strides[j], lo = g.p.pad_lo[j];
      if (lo < 0) return std::nullopt;
      st.push_back(s), dil.push_back(d - 1), pl.push_back(lo);
      pr.push_back((g.kernel[j] - 1) * s + (g.out[j] - 1) * d + 1 - g.in[j] - lo);
    }
    // Blocks of the images (the sum's outer index), each its partial
    // gradient, summed in block order: a function of the shape alone. One
    // or two images are cut along the cotangent's rows too, where rows are
    // outermost in an image, input and cotangent (channels last).
    cut(plan, g.C, g.flops, 1);
    const bool rows_outer = g.xs[2] * g.in[0] == g.xs[1] && g.ws[2] * g.kernel[0] == g.ws[1];
    const auto chunks = chunk && rows_outer && g.B == 1 ? cut_rows(g.C, g.flops, g.kernel[0], g.in[0], st[0],
                                                          (g.out[0] - 1) * g.p.strides[0], pl[0], kWeightsChunkRows)
                                               : std::nullopt;
    if (chunks) {
      plan.take(*chunks, g.C);
      row_kinds = chunks->kinds;
    } else {
      row_kinds.push_back({g.kernel[0], g.in[0], pl[0], pr[0]});
    }
  } else {
    return std::nullopt;
  }
  OneThread one;
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The blocks' kinds: (images, rows): the full blocks' and the last's, or a chunk kind's.
    std::vector<std::pair<std::int64_t, RowChunks::Kind>> kinds;
    if (plan.row_chunks > 1) {
      for (const auto& q : row_kinds) kinds.push_back({1, q});
    } else {
      const std::int64_t last = (plan.form == Form::backward_data ? g.N : g.C) - (plan.blocks - 1) * plan.per;
      const RowChunks::Kind whole = row_kinds.at(0);
      kinds.push_back({plan.per, whole});
      if (last != plan.per) kinds.push_back({last, whole});
    }
    for (const auto& [size, rows] : kinds) {
      GradPlan::Prim prim;
      prim.size = size;
      pl[0] = rows.top;  // a chunk's pads (the whole image's otherwise)
      pr[0] = rows.bottom;
      if (plan.form == Form::backward_data) {
        MemDims dd{size, g.C}, sd{size, g.O}, xs(g.xs.begin(), g.xs.end()), zs(g.zs.begin(), g.zs.end());
        for (std::size_t j = 0; j < k; ++j) dd.push_back(j == 0 ? rows.in_rows : g.in[j]), sd.push_back(j == 0 ? rows.rows : g.out[j]);
        if (plan.row_chunks > 1) {  // a dense image of its rows
          xs[0] = rows.in_rows * g.xs[2];
          zs[0] = rows.rows * g.zs[2];
        }
        prim.a = dnnl::memory::desc(dd, in_dt, xs);
        prim.c = dnnl::memory::desc(sd, dt::f32, zs);
        const dnnl::memory::desc wany(plan.plain.dims(), in_dt, any);
        dnnl::convolution_forward::primitive_desc hint(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            dnnl::memory::desc(sd, in_dt, zs), wany,
                                            prim.a, st, dil, pl, pr),
            engine());
        dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, prim.c, wany, prim.a, st, dil, pl, pr),
            attr, engine(), hint);
        if (plan.prims.empty()) plan.wei = pd.weights_desc();
        else if (pd.weights_desc() != plan.wei)  // one kernel layout for every block
          return plan.row_chunks > 1 ? plan_backward(g, false) : std::nullopt;
        prim.exec = dnnl::convolution_backward_data(pd);
        prim.scratch_md = pd.scratchpad_desc();
        if (plan.impl.empty()) plan.impl = pd.impl_info_str();
      } else {
        MemDims sd{size, g.N}, dd{size, g.O}, wd;
        MemDims ss{g.xs[1], g.xs[0]}, ds{g.ws[1], g.ws[0]}, ws;
        if (g.B > 1) wd = {g.B, g.O / g.B, g.N / g.B}, ws = {g.O / g.B * g.zs[1], g.zs[1], g.zs[0]};
        else wd = {g.O, g.N}, ws = {g.zs[1], g.zs[0]};
        for (std::size_t j = 0; j < k; ++j) {
          sd.push_back(j == 0 ? rows.in_rows : g.in[j]), ss.push_back(g.xs[2 + j]);
          dd.push_back(j == 0 ? rows.rows : g.kernel[j]), ds.push_back(g.ws[2 + j]);
          wd.push_back(g.out[j]), ws.push_back(g.zs[2 + j]);
        }
        if (plan.row_chunks > 1) {  // a dense image of its rows
          ss[0] = rows.in_rows * g.xs[2];
          ds[0] = rows.rows * g.ws[2];
        }
        prim.a = dnnl::memory::desc(sd, in_dt, ss);
        prim.b = dnnl::memory::desc(dd, in_dt, ds);
        // One block writes the result; several write dense partial sums.
        plan.result_dims = wd, plan.result_strides = ws;
        prim.c_user = dnnl::memory::desc(wd, dt::f32, plan.blocks == 1 ? ws : dense_strides(wd));
        const dnnl::memory::desc wany(wd, dt::f32, any);
        dnnl::convolution_forward::primitive_desc hint(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            prim.a, dnnl::memory::desc(wd, in_dt, any), prim.b, st, dil, pl, pr),
            engine());
        dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, prim.a, wany, prim.b, st, dil,
                                                     pl, pr),
            attr, engine(), hint);
        prim.c = pd.diff_weights_desc();
        if (prim.c != prim.c_user) {
          prim.c_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), prim.c, engine(), prim.c_user));
          prim.c_bytes = aligned64(prim.c.get_size());
        }
        prim.exec = dnnl::convolution_backward_weights(pd);
        prim.scratch_md = pd.scratchpad_desc();
        if (plan.impl.empty()) plan.impl = pd.impl_info_str();
      }
      prim.scratch = prim.scratch_md.get_size();
      plan.prims.push_back(std::move(prim));
    }
    if (plan.form == Form::backward_data) {
      plan.wei_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan.plain, engine(), plan.wei));
      plan.workspace = plan.plain_bytes + aligned64(plan.wei.get_size());
    } else {
      std::size_t c = 0;
      for (auto& p : plan.prims) c = std::max(c, p.c_bytes);
      plan.partial_bytes = plan.blocks > 1 ? aligned64(plan.prims.front().c_user.get_size()) : 0;
      plan.c_offset = plan.partial_bytes * std::size_t(plan.blocks);
      plan.workspace = plan.c_offset + c * std::size_t(plan.blocks);
    }
  } catch (const dnnl::error&) {
    if (plan.row_chunks > 1) return plan_backward(g, false);
    return std::nullopt;  // oneDNN has no implementation: the forward form
  }
  return plan;
}

template <class T>
T wrap_mul_add(T acc, T x, T w) {
  if constexpr (std::is_integral_v<T>) {
    using U = wrap_unsigned_t<T>;
    return T(U(acc) + U(x) * U(w));
  } else {
    return acc + x * w;
  }
}

class ConvThunk final : public rt::Thunk {
 public:
  ConvThunk(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes)
      : g_(n), x_(reads.at(0)), w_(reads.at(1)), z_(writes.at(0)), bytes_(std::size_t(numel(n.shape())) * dtype_size(n.dtype())) {
    grad_ = plan_backward(g_);
    if (!grad_) plan_ = plan_onednn(g_);
    if ((plan_ && plan_->workspace) || (grad_ && grad_->workspace)) ws_ = writes.at(1);
    std::ostringstream os;
    os << "convolution " << n.aval.str();
    if (grad_) {
      os << " (oneDNN " << (grad_->form == Form::backward_data ? "backward-data " : "backward-weights ") << grad_->impl
         << ", " << grad_->blocks << (grad_->blocks == 1 ? " block" : " blocks");
      if (grad_->row_chunks > 1) os << " of " << grad_->chunk_rows << " rows";
    } else if (plan_) {
      os << " (oneDNN " << plan_->impl << (plan_->prepared ? ", input dilated first" : "") << ", " << plan_->blocks
         << (plan_->blocks == 1 ? " block" : " blocks");
      if (plan_->row_chunks > 1) os << " of " << plan_->chunk_rows << " rows";
    }
    else os << " (tessel loops";
    const bool chunked = (plan_ && plan_->row_chunks > 1) || (grad_ && grad_->row_chunks > 1);
    if (g_.flops >= (chunked ? kChunkedMachineWideFlops : kMachineWideFlops)) {
      width_ = machine_wide_width();
      os << ", " << width_words(width_);
    }
    os << ')';
    text_ = os.str();
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }
  rt::ComputeSlot::Width width() const override { return width_; }
  bool pure() const override { return true; }
  std::int64_t work() const override { return std::int64_t(std::min(g_.flops, 9e18)); }

  void run(rt::ExecContext& ctx) const override {
    if (bytes_ == 0) return;
    void* z = ctx.slots[std::size_t(z_)];
    if (g_.empty_sum) {
      std::memset(z, 0, bytes_);
      return;
    }
    auto parallel = [&](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f) {
      if (ctx.machine_wide) rt::parallel_for_machine(0, n, 1, f);
      else rt::parallel_for(0, n, 1, f);
    };
    if (grad_) return run_backward(ctx, parallel);
    if (plan_) return run_onednn(ctx, parallel);
    if (g_.operand != g_.dtype)
      throw InternalError(cat("a ", dtype_name(g_.operand), " convolution into ", dtype_name(g_.dtype), " without oneDNN"));
    visit_wide_dtype(g_.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
        throw InternalError(cat("convolution of ", dtype_name(g_.dtype), " reached codegen"));
      } else {
        run_loops<T>(ctx, parallel);
      }
    });
  }

 private:
  template <class P>
  void run_backward(rt::ExecContext& ctx, const P& parallel) const {
    const GradPlan& plan = *grad_;
    // Operands of 4 bytes an element, or 2 (bfloat16); the result float32.
    const std::size_t e = dtype_size(g_.operand);
    char* x = static_cast<char*>(ctx.slots[std::size_t(x_)]);
    const char* w = static_cast<const char*>(ctx.slots[std::size_t(w_)]);
    float* z = static_cast<float*>(ctx.slots[std::size_t(z_)]);
    char* ws = ws_ >= 0 ? static_cast<char*>(ctx.slots[std::size_t(ws_)]) : nullptr;
    const std::size_t k = g_.rank();
    if (plan.form == Form::backward_data) {
      // The kernel reversed, its features swapped, dense (G, I, O / G, K...), then in oneDNN's layout.
      char* plain = ws;
      const std::int64_t Og = g_.O / g_.G, taps = numel(g_.kernel);
      std::vector<std::int64_t> t(k);
      std::int64_t i = 0;
      for (std::int64_t gg = 0; gg < g_.G; ++gg)
        for (std::int64_t o = 0; o < g_.I; ++o)
          for (std::int64_t c = 0; c < Og; ++c)
            for (std::int64_t tap = 0; tap < taps; ++tap, ++i) {
              std::int64_t off = (gg * Og + c) * g_.ws[0] + o * g_.ws[1];
              for (std::int64_t r = tap, j = std::int64_t(k) - 1; j >= 0; --j) {
                const std::int64_t K = g_.kernel[std::size_t(j)];
                off += (K - 1 - r % K) * g_.ws[2 + std::size_t(j)];
                r /= K;
              }
              std::memcpy(plain + std::size_t(i) * e, w + std::size_t(off) * e, e);
            }
      OneThread one;
      dnnl::stream s(engine());
      dnnl::memory from(plan.plain, engine(), plain), to(plan.wei, engine(), ws + plan.plain_bytes);
      plan.wei_reorder->execute(s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
      s.wait();
    }
    parallel(plan.blocks, [&](std::int64_t b0, std::int64_t b1) {
      OneThread one;
      dnnl::stream s(engine());
      Scratchpad scratch;
      for (std::int64_t b = b0; b < b1; ++b) {
        // A chunk of rows: its image, its first cotangent and input rows.
        const std::int64_t chunk = b % plan.row_chunks;
        const auto& prim = plan.row_chunks > 1 ? plan.prims[plan.chunk_prim[std::size_t(chunk)]]
                                               : block_prim(plan.prims, b, plan.blocks);
        const std::int64_t at = plan.row_chunks > 1 ? b / plan.row_chunks : b * plan.per;
        const std::int64_t src_row = plan.row_chunks > 1 ? plan.chunk_in[std::size_t(chunk)] * g_.xs[2] : 0,
                           dd_row = plan.row_chunks > 1 ? plan.chunk_out[std::size_t(chunk)] * g_.ws[2] : 0;
        dnnl::memory scr = scratch.of(prim.scratch_md, prim.scratch);
        if (plan.form == Form::backward_data) {
          const std::int64_t in_row = plan.row_chunks > 1 ? plan.chunk_in[std::size_t(chunk)] * g_.xs[2] : 0,
                             out_row = plan.row_chunks > 1 ? plan.chunk_out[std::size_t(chunk)] * g_.zs[2] : 0;
          dnnl::memory dd(prim.a, engine(), x + std::size_t(at * g_.xs[0] + in_row) * e),
              wei(plan.wei, engine(), ws + plan.plain_bytes);
          dnnl::memory ds(prim.c, engine(), z + at * g_.zs[0] + out_row);
          prim.exec.execute(s, {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, ds},
                                {DNNL_ARG_SCRATCHPAD, scr}});
        } else {
          void* out = plan.blocks == 1 ? static_cast<void*>(z) : static_cast<void*>(ws + std::size_t(b) * plan.partial_bytes);
          dnnl::memory src(prim.a, engine(), x + std::size_t(at * g_.xs[1] + src_row) * e),
              dd(prim.b, engine(), const_cast<char*>(w) + std::size_t(at * g_.ws[1] + dd_row) * e);
          dnnl::memory dw(prim.c, engine(), prim.c_reorder ? static_cast<void*>(ws + plan.c_offset + std::size_t(b) * prim.c_bytes)
                                                           : out);
          prim.exec.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                                {DNNL_ARG_SCRATCHPAD, scr}});
          if (prim.c_reorder) {
            dnnl::memory to(prim.c_user, engine(), out);
            prim.c_reorder->execute(s, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, to}});
          }
        }
      }
      s.wait();
    });
    if (plan.form == Form::backward_weights && plan.blocks > 1) {
      // The partial sums, added in block order, into the result's layout.
      const std::int64_t n = numel(Shape(plan.result_dims.begin(), plan.result_dims.end()));
      parallel((n + 4095) / 4096, [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t e = c0 * 4096; e < std::min(n, c1 * 4096); ++e) {
          float acc = 0;
          for (std::int64_t b = 0; b < plan.blocks; ++b)
            acc += reinterpret_cast<const float*>(ws + std::size_t(b) * plan.partial_bytes)[e];
          std::int64_t off = 0;
          for (std::size_t d = plan.result_dims.size(), r = std::size_t(e); d-- > 0;) {
            off += std::int64_t(r % std::size_t(plan.result_dims[d])) * plan.result_strides[d];
            r /= std::size_t(plan.result_dims[d]);
          }
          z[off] = acc;
        }
      });
    }
  }

  template <class P>
  void run_onednn(rt::ExecContext& ctx, const P& parallel) const {
    const OneDnnPlan& plan = *plan_;
    // Operands of 4 bytes an element, or 2 (bfloat16); the result float32.
    const std::size_t e = dtype_size(g_.operand);
    const float* x = static_cast<const float*>(ctx.slots[std::size_t(x_)]);
    char* w = static_cast<char*>(ctx.slots[std::size_t(w_)]);
    float* z = static_cast<float*>(ctx.slots[std::size_t(z_)]);
    char* ws = ws_ >= 0 ? static_cast<char*>(ctx.slots[std::size_t(ws_)]) : nullptr;
    const std::size_t k = g_.rank();
    const std::int64_t Nb = g_.N / g_.B, Ob = g_.O / g_.B;
    const char* src = reinterpret_cast<const char*>(x);
    std::int64_t src_batch_stride = g_.xs[0], src_row_stride = g_.xs[2];
    if (plan.prepared) {
      float* prep = reinterpret_cast<float*>(ws);
      const std::int64_t sp = numel(plan.prep), sin = numel(g_.in);
      src_batch_stride = sp * g_.C;
      src_row_stride = sp / plan.prep[0] * g_.C;  // dense (N, S'..., C)
      parallel(g_.N, [&](std::int64_t n0, std::int64_t n1) {
        std::vector<std::int64_t> s(k);
        for (std::int64_t n = n0; n < n1; ++n) {
          float* img = prep + n * sp * g_.C;
          std::memset(img, 0, std::size_t(sp * g_.C) * sizeof(float));
          for (std::int64_t f = 0; f < sin; ++f) {
            std::int64_t r = f, dst = 0, src_off = n * g_.xs[0];
            bool inside = true;
            for (std::size_t j = k; j-- > 0;) s[j] = r % g_.in[j], r /= g_.in[j];
            for (std::size_t j = 0; j < k; ++j) {
              const std::int64_t q = s[j] * g_.p.lhs_dilation[j] + g_.p.pad_lo[j];
              if (q < 0 || q >= plan.prep[j]) inside = false;
              dst = dst * plan.prep[j] + q;
              src_off += s[j] * g_.xs[2 + j];
            }
            if (!inside) continue;
            float* d = img + dst * g_.C;
            for (std::int64_t c = 0; c < g_.C; ++c) d[c] = x[src_off + c * g_.xs[1]];
          }
        }
      });
      src = reinterpret_cast<const char*>(prep);
    }
    {
      OneThread one;
      dnnl::stream s(engine());
      for (auto& prim : plan.prims) {
        if (!prim.reorder) continue;
        for (std::int64_t bg = 0; bg < g_.B; ++bg) {
          dnnl::memory from(prim.wei_user, engine(), w + std::size_t(bg * Ob * g_.ws[0]) * e);
          dnnl::memory to(prim.wei, engine(), ws + prim.wei_offset + std::size_t(bg) * prim.wei_bytes);
          prim.reorder->execute(s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
        }
      }
      s.wait();
    }
    // Blocks: batch group major, then the group's share of the batch.
    parallel(g_.B * plan.blocks, [&](std::int64_t b0, std::int64_t b1) {
      OneThread one;
      dnnl::stream s(engine());
      Scratchpad scratch;
      for (std::int64_t i = b0; i < b1; ++i) {
        const std::int64_t bg = i / plan.blocks, b = i % plan.blocks;
        // A chunk of rows: its image, and its first output and input rows.
        const std::int64_t chunk = b % plan.row_chunks, n0 = plan.row_chunks > 1 ? b / plan.row_chunks : b * plan.mb;
        const auto& prim = plan.row_chunks > 1 ? plan.prims[plan.chunk_prim[std::size_t(chunk)]]
                                               : block_prim(plan.prims, b, plan.blocks);
        const std::int64_t src_row = plan.row_chunks > 1 ? plan.chunk_in[std::size_t(chunk)] * src_row_stride : 0,
                           dst_row = plan.row_chunks > 1 ? plan.chunk_out[std::size_t(chunk)] * g_.zs[2] : 0;
        dnnl::memory src_m(prim.src, engine(), const_cast<char*>(src) + std::size_t((bg * Nb + n0) * src_batch_stride + src_row) * e);
        void* wei = prim.reordered ? static_cast<void*>(ws + prim.wei_offset + std::size_t(bg) * prim.wei_bytes)
                                 : static_cast<void*>(w + std::size_t(bg * Ob * g_.ws[0]) * e);
        dnnl::memory wei_m(prim.wei, engine(), wei);
        dnnl::memory dst_m(prim.dst, engine(), z + n0 * g_.zs[0] + bg * Ob * g_.zs[1] + dst_row);
        dnnl::memory scr = scratch.of(prim.scratch_md, prim.scratch);
        prim.conv.execute(s, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_DST, dst_m},
                              {DNNL_ARG_SCRATCHPAD, scr}});
      }
      s.wait();
    });
  }

  // The direct sum (integers wrap), one (batch, output feature) pair after
  // another on the device's threads.
  template <class T, class P>
  void run_loops(rt::ExecContext& ctx, const P& parallel) const {
    const T* x = static_cast<const T*>(ctx.slots[std::size_t(x_)]);
    const T* w = static_cast<const T*>(ctx.slots[std::size_t(w_)]);
    T* z = static_cast<T*>(ctx.slots[std::size_t(z_)]);
    const std::size_t k = g_.rank();
    const std::int64_t Nb = g_.N / g_.B, Og = g_.O / g_.G, Ob = g_.O / g_.B;
    const std::int64_t nout = numel(g_.out), ntaps = numel(g_.kernel);
    parallel(Nb * g_.O, [&](std::int64_t i0, std::int64_t i1) {
      std::vector<std::int64_t> y(k), t(k);
      for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t n = i / g_.O, o = i % g_.O;
        const std::int64_t xn = (o / Ob) * Nb + n, cbase = (o / Og) * g_.I;
        for (std::int64_t f = 0; f < nout; ++f) {
          for (std::int64_t r = f, j = std::int64_t(k) - 1; j >= 0; --j)
            y[std::size_t(j)] = r % g_.out[std::size_t(j)], r /= g_.out[std::size_t(j)];
          T acc = T(0);
          for (std::int64_t tap = 0; tap < ntaps; ++tap) {
            for (std::int64_t r = tap, j = std::int64_t(k) - 1; j >= 0; --j)
              t[std::size_t(j)] = r % g_.kernel[std::size_t(j)], r /= g_.kernel[std::size_t(j)];
            std::int64_t xo = xn * g_.xs[0] + cbase * g_.xs[1], wo = o * g_.ws[0];
            bool inside = true;
            for (std::size_t j = 0; j < k && inside; ++j) {
              const std::int64_t q = y[j] * g_.p.strides[j] + t[j] * g_.p.rhs_dilation[j] - g_.p.pad_lo[j];
              if (q < 0 || q % g_.p.lhs_dilation[j] != 0 || q / g_.p.lhs_dilation[j] >= g_.in[j]) inside = false;
              xo += (q / std::max<std::int64_t>(g_.p.lhs_dilation[j], 1)) * g_.xs[2 + j];
              wo += t[j] * g_.ws[2 + j];
            }
            if (!inside) continue;
            for (std::int64_t c = 0; c < g_.I; ++c) acc = wrap_mul_add(acc, x[xo + c * g_.xs[1]], w[wo + c * g_.ws[1]]);
          }
          std::int64_t zo = n * g_.zs[0] + o * g_.zs[1];
          for (std::size_t j = 0; j < k; ++j) zo += y[j] * g_.zs[2 + j];
          z[zo] = acc;
        }
      }
    });
  }

  Geometry g_;
  int x_, w_, z_, ws_ = -1;
  std::size_t bytes_;
  std::optional<OneDnnPlan> plan_;
  std::optional<GradPlan> grad_;
  rt::ComputeSlot::Width width_ = rt::ComputeSlot::Width::device;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> conv_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<ConvThunk>(n, reads, writes);
}

bool conv_in_bfloat16(const Node& n) {
  if (n.op != Op::conv || n.dtype() != DType::float32 || n.in[0]->dtype() != DType::float32) return false;
  static const bool native = (unsigned(dnnl::get_effective_cpu_isa()) & unsigned(dnnl::cpu_isa::avx512_core_bf16)) ==
                             unsigned(dnnl::cpu_isa::avx512_core_bf16);
  if (!native) return false;
  Geometry g(n);
  const bool gradient_form = plan_backward(g).has_value();
  g.operand = DType::bfloat16;
  return gradient_form ? plan_backward(g).has_value() : plan_onednn(g).has_value();
}

std::size_t conv_workspace(const Node& n) {
  const Geometry g(n);
  if (auto grad = plan_backward(g)) return grad->workspace;
  auto plan = plan_onednn(g);
  return plan ? plan->workspace : 0;
}

}  // namespace tessel::codegen
