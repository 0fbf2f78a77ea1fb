#include "codegen/conv.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "codegen/conv_plan.hpp"
#include "codegen/library.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

using detail::cat;
using namespace conv_plan;

// One thread's block of a concatenated input (ConvThunk::gather_rows),
// kept between calls (it grows to the largest block the thread has run):
// a chunk of rows, or a block of a few images, is written and read while
// it is in L2.
struct RowsBuffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  ~RowsBuffer() { std::free(p); }
  char* grow(std::size_t want) {
    if (bytes < want) {
      std::free(p);
      bytes = (want + 4095) / 4096 * 4096;
      p = std::aligned_alloc(64, bytes);
      if (!p) throw std::bad_alloc();
    }
    return static_cast<char*>(p);
  }
};
thread_local RowsBuffer tls_rows;

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
      : g_(n), x_(reads.at(0)), w_(reads.back()), z_(writes.at(0)), bytes_(std::size_t(numel(n.shape())) * dtype_size(n.dtype())) {
    if (reads.size() > 2) {
      // The input's parts (conv_reads_parts): rows of each image, in turn.
      x_ = -1;
      parts_.assign(reads.begin(), reads.end() - 1);
      starts_.push_back(0);
      for (auto& part : n.in[0]->in) starts_.push_back(starts_.back() + part->shape()[1]);
      H_ = starts_.back();
      images_ = n.in[0]->shape()[0];
      line_ = std::size_t(numel(n.in[0]->shape())) / std::size_t(std::max<std::int64_t>(1, images_ * H_));
    }
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
    if (!parts_.empty()) os << ", the input from " << parts_.size() << " parts" << (by_block() ? " by block" : "");
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
    if (!parts_.empty() && !by_block()) {
      // A form that reads the input whole: the parts concatenated first.
      std::vector<char> whole(std::size_t(images_ * H_) * line_ * dtype_size(g_.operand));
      gather_rows(ctx, whole.data(), 0, images_, 0, H_);
      rt::ExecContext with = ctx;
      with.slots.push_back(whole.data());
      return run_whole(with);
    }
    run_whole(ctx);
  }

 private:
  // The input's buffer (the last slot: the parts concatenated in run()).
  // (By block, the forward reads no whole input: null.)
  void* lhs(const rt::ExecContext& ctx) const {
    return x_ >= 0 ? ctx.slots[std::size_t(x_)] : by_block() ? nullptr : ctx.slots.back();
  }
  // Whether the forward primitive's blocks each take their rows of the
  // parts (gather_rows into a thread's buffer) instead of the whole input.
  // The images are the input's outermost dim: its batch (the forward) or
  // its features (the kernel's gradient, backward-weights).
  bool by_block() const {
    if (grad_) return grad_->form == Form::backward_weights && g_.p.lhs_spec[1] == 0;
    return plan_ && !plan_->prepared && g_.p.lhs_spec[0] == 0;
  }

  // Rows [row0, row0 + rows) of images [img0, img0 + imgs) of the
  // concatenated input, from its parts, into dst laid out as the whole
  // input from (img0, row0): images H_ rows apart, rows line_ elements.
  void gather_rows(const rt::ExecContext& ctx, char* dst, std::int64_t img0, std::int64_t imgs, std::int64_t row0,
                   std::int64_t rows) const {
    const std::size_t line = line_ * dtype_size(g_.operand);
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      const std::int64_t lo = std::max(row0, starts_[p]), hi = std::min(row0 + rows, starts_[p + 1]);
      if (lo >= hi) continue;
      const std::int64_t h = starts_[p + 1] - starts_[p];
      const char* src = static_cast<const char*>(ctx.slots[std::size_t(parts_[p])]);
      for (std::int64_t i = 0; i < imgs; ++i)
        std::memcpy(dst + std::size_t(i * H_ + lo - row0) * line, src + std::size_t((img0 + i) * h + lo - starts_[p]) * line,
                    std::size_t(hi - lo) * line);
    }
  }

  // A block's input from the parts: its images from img0 and rows from
  // row0, as many as the primitive's source `md` has (dims: images,
  // features, rows, ...), into this thread's buffer laid out as the whole
  // input.
  char* block_input(const rt::ExecContext& ctx, const dnnl::memory::desc& md, std::int64_t img0, std::int64_t row0) const {
    const MemDims d = md.dims();
    char* at = tls_rows.grow(std::size_t((d[0] - 1) * H_ + d[2]) * line_ * dtype_size(g_.operand));
    gather_rows(ctx, at, img0, d[0], row0, d[2]);
    return at;
  }

  void run_whole(rt::ExecContext& ctx) const {
    auto parallel = [&](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f) {
      rt::parallel_for(ctx, 0, n, 1, f);
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

  template <class P>
  void run_backward(rt::ExecContext& ctx, const P& parallel) const {
    const GradPlan& plan = *grad_;
    // Operands of 4 bytes an element, or 2 (bfloat16); the result float32.
    const std::size_t e = dtype_size(g_.operand);
    char* x = static_cast<char*>(lhs(ctx));
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
        // A chunk of rows: its image; the first row it reads of x (the
        // cotangent, or the input) and the first of the sum's outer index
        // (the result's, or the cotangent's).
        const bool chunked = plan.row_chunks > 1;
        const std::int64_t chunk = b % plan.row_chunks;
        const auto& prim = chunked ? plan.prims[plan.chunk_prim[std::size_t(chunk)]] : block_prim(plan.prims, b, plan.blocks);
        const std::int64_t at = chunked ? b / plan.row_chunks : b * plan.per;
        const std::int64_t x_row = chunked ? plan.chunk_in[std::size_t(chunk)] * g_.xs[2] : 0,
                           first = chunked ? plan.chunk_out[std::size_t(chunk)] : 0;
        dnnl::memory scr = scratch.of(prim.scratch_md, prim.scratch);
        if (plan.form == Form::backward_data) {
          dnnl::memory dd(prim.a, engine(), x + std::size_t(at * g_.xs[0] + x_row) * e),
              wei(plan.wei, engine(), ws + plan.plain_bytes);
          dnnl::memory ds(prim.c, engine(), z + at * g_.zs[0] + first * g_.zs[2]);
          prim.exec.execute(s, {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, ds},
                                {DNNL_ARG_SCRATCHPAD, scr}});
        } else {
          void* out = plan.blocks == 1 ? static_cast<void*>(z) : static_cast<void*>(ws + std::size_t(b) * plan.partial_bytes);
          char* from = parts_.empty() ? x + std::size_t(at * g_.xs[1] + x_row) * e
                                      : block_input(ctx, prim.a, at, chunked ? plan.chunk_in[std::size_t(chunk)] : 0);
          dnnl::memory src(prim.a, engine(), from),
              dd(prim.b, engine(), const_cast<char*>(w) + std::size_t(at * g_.ws[1] + first * g_.ws[2]) * e);
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
    const float* x = static_cast<const float*>(lhs(ctx));
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
        char* from = parts_.empty()
                         ? const_cast<char*>(src) + std::size_t((bg * Nb + n0) * src_batch_stride + src_row) * e
                         : block_input(ctx, prim.src, bg * Nb + n0, plan.row_chunks > 1 ? plan.chunk_in[std::size_t(chunk)] : 0);
        dnnl::memory src_m(prim.src, engine(), from);
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
    const T* x = static_cast<const T*>(lhs(ctx));
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
  // The input's parts (slots), the first row of each and one past the last
  // (starts_), the rows and images of the whole, and a row's elements.
  std::vector<int> parts_;
  std::vector<std::int64_t> starts_;
  std::int64_t H_ = 0, images_ = 0;
  std::size_t line_ = 0;
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

bool conv_reads_parts(const Node& n) {
  if (n.op != Op::conv || n.in[0]->op != Op::concatenate || n.in[0]->in.size() < 2) return false;
  const auto& p = n.attr<attr::Conv>();
  if (p.lhs_spec.size() < 3 || p.lhs_spec[2] != 1 || n.in[0]->attr<attr::Dimension>().dimension != 1) return false;
  const Geometry g(n);
  if (g.dtype != DType::float32 || (g.operand != DType::float32 && g.operand != DType::bfloat16) || g.rank() > 3 ||
      g.empty_sum)
    return false;
  // The kernel's gradient (plan_backward's backward-weights form), whose
  // images are the input's features; or the forward form on the input as it
  // lies (plan_onednn, not prepared). Any other plan the thunk makes reads
  // the parts concatenated whole (the same values, not the gain).
  if (g.weights_form()) return p.lhs_spec[1] == 0;
  return p.lhs_spec[0] == 0 && g.input_as_it_lies();
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
