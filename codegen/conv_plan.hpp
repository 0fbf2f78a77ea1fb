// The plans of the convolution thunk (codegen/conv.cpp): how oneDNN runs a
// conv node (the forward primitive, or a gradient form on a backward one),
// cut into blocks and chunks of rows for the device's threads. Internal to
// codegen/conv*.cpp.
#pragma once

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel::codegen::conv_plan {

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

dnnl::engine& engine();

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
  // No input dilation.
  bool undilated() const {
    return std::all_of(p.lhs_dilation.begin(), p.lhs_dilation.end(), [](std::int64_t d) { return d == 1; });
  }
  // oneDNN's forward takes the input as it lies: no input dilation, no
  // negative pad (else plan_onednn prepares it in the workspace).
  bool input_as_it_lies() const {
    for (std::size_t j = 0; j < rank(); ++j)
      if (p.lhs_dilation[j] != 1 || p.pad_lo[j] < 0 || p.pad_hi[j] < 0) return false;
    return true;
  }
  // The kernel gradient's form plan_backward runs as backward-weights: no
  // input dilation or feature groups, the kernel (a cotangent) larger than
  // the result.
  bool weights_form() const { return undilated() && G == 1 && numel(kernel) > numel(out); }
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

std::optional<OneDnnPlan> plan_onednn(const Geometry& g);

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
  // `images` images, each cut into c's chunks: a block each. Returns the
  // chunks' kinds.
  std::vector<RowChunks::Kind> take(const RowChunks& c, std::int64_t images) {
    row_chunks = c.count;
    chunk_rows = c.per;
    blocks = images * c.count;
    per = 1;
    chunk_in = c.in;
    chunk_out = c.out;
    chunk_prim = c.kind;
    return c.kinds;
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

// chunk: whether one or two images may be cut along rows (a plan whose
// chunks oneDNN cannot run in one kernel layout is made again whole).
std::optional<GradPlan> plan_backward(const Geometry& g, bool chunk = true);

}  // namespace tessel::codegen::conv_plan
