// The convolution thunk's plans (codegen/conv_plan.hpp).
#include "codegen/conv_plan.hpp"

#include <algorithm>

#include "tessel/core/errors.hpp"

namespace tessel::codegen::conv_plan {

namespace {

using detail::cat;

std::int64_t dilate_dim(std::int64_t d, std::int64_t k) { return d == 0 ? 0 : 1 + k * (d - 1); }

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

}  // namespace

dnnl::engine& engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // outlives threads still running at exit
  return *e;
}

std::optional<OneDnnPlan> plan_onednn(const Geometry& g) {
  const std::size_t k = g.rank();
  if (g.dtype != DType::float32 || k < 1 || k > 3 || g.empty_sum) return std::nullopt;
  const bool bf16 = g.operand == DType::bfloat16;
  if (!bf16 && g.operand != DType::float32) return std::nullopt;
  const std::int64_t Nb = g.N / g.B, Ob = g.O / g.B;  // one batch group's
  OneDnnPlan plan;
  plan.prepared = !g.input_as_it_lies();
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

std::optional<GradPlan> plan_backward(const Geometry& g, bool chunk) {
  const std::size_t k = g.rank();
  if (g.dtype != DType::float32 || k < 1 || k > 3 || g.empty_sum) return std::nullopt;
  if (g.operand != DType::float32 && g.operand != DType::bfloat16) return std::nullopt;
  bool dilated = false, unit_strides = true;
  for (std::size_t j = 0; j < k; ++j) {
    dilated = dilated || g.p.lhs_dilation[j] > 1;
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
    row_kinds = chunks ? plan.take(*chunks, g.N) : std::vector<RowChunks::Kind>{{g.out[0], g.in[0], pl[0], pr[0]}};
  } else if (g.weights_form()) {
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
    row_kinds = chunks ? plan.take(*chunks, g.C) : std::vector<RowChunks::Kind>{{g.kernel[0], g.in[0], pl[0], pr[0]}};
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

}  // namespace tessel::codegen::conv_plan
