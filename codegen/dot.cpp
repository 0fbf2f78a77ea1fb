#include "codegen/dot.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "codegen/gemm.hpp"
#include "codegen/library.hpp"
#include "codegen/gemm_bf16.hpp"
#include "codegen/gemm_int8.hpp"
#include "codegen/host.hpp"
#include "runtime/buffer.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

// One operand seen as a 3-D (batch, rows, cols) matrix with element strides.
struct Operand3 {
  std::int64_t dims[3] = {1, 1, 1};
  std::int64_t strides[3] = {0, 0, 0};
  bool needs_copy = false;
  std::vector<std::int64_t> perm;  // operand dims in (batch, rows, cols) order
  Shape shape;                     // the operand's shape
};

// Groups `order` (operand dims) into three consecutive groups of sizes
// g0, g1, g2; each group must be contiguous in row-major memory to be a
// single strided dimension.
Operand3 view(const Shape& shape, const std::vector<std::int64_t>& g0, const std::vector<std::int64_t>& g1,
              const std::vector<std::int64_t>& g2) {
  Operand3 v;
  v.shape = shape;
  auto st = row_major_strides(shape);
  const std::vector<std::int64_t>* groups[3] = {&g0, &g1, &g2};
  for (int g = 0; g < 3; ++g) {
    const auto& dims = *groups[g];
    v.perm.insert(v.perm.end(), dims.begin(), dims.end());
    std::int64_t size = 1, stride = 1;
    bool first = true;
    for (int i = int(dims.size()) - 1; i >= 0; --i) {
      std::int64_t d = dims[i];
      if (shape[d] == 1) continue;
      if (first) {
        stride = st[d];
        first = false;
      } else if (st[d] != stride * size) {
        v.needs_copy = true;
      }
      size *= shape[d];
    }
    v.dims[g] = size;
    v.strides[g] = stride;
  }
  if (v.needs_copy) {
    // After copying into (batch, rows, cols) order: plain row-major.
    v.strides[2] = 1;
    v.strides[1] = v.dims[2];
    v.strides[0] = v.dims[1] * v.dims[2];
  }
  for (int g = 0; g < 3; ++g)
    if (v.dims[g] == 1) v.strides[g] = g == 2 ? 1 : v.dims[g + 1] * v.strides[g + 1];
  return v;
}

std::vector<std::int64_t> free_dims(int rank, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> f;
  for (std::int64_t i = 0; i < rank; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end()) f.push_back(i);
  return f;
}

// Copies an operand into the order `perm` (a transpose), contiguous.
void permute_copy(const void* src, void* dst, const Shape& shape, const std::vector<std::int64_t>& perm,
                  std::size_t es) {
  auto st = row_major_strides(shape);
  Shape ps(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) ps[i] = shape[perm[i]];
  const std::int64_t n = numel(shape);
  std::vector<std::int64_t> idx(perm.size(), 0);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (std::int64_t f = 0; f < n; ++f) {
    std::int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i) off += idx[i] * st[perm[i]];
    std::memcpy(d + f * es, s + off * es, es);
    for (int k = int(perm.size()) - 1; k >= 0; --k) {
      if (++idx[k] < ps[k]) break;
      idx[k] = 0;
    }
  }
}

template <class T>
void loop_matmul(const T* a, const Operand3& va, const T* b, const Operand3& vb, T* c) {
  const std::int64_t B = va.dims[0], M = va.dims[1], K = va.dims[2], N = vb.dims[2];
  for (std::int64_t bi = 0; bi < B; ++bi)
    for (std::int64_t i = 0; i < M; ++i) {
      T* crow = c + (bi * M + i) * N;
      for (std::int64_t j = 0; j < N; ++j) crow[j] = T(0);
      for (std::int64_t k = 0; k < K; ++k) {
        T av = a[bi * va.strides[0] + i * va.strides[1] + k * va.strides[2]];
        const T* brow = b + bi * vb.strides[0] + k * vb.strides[1];
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          using U = wrap_unsigned_t<T>;  // integer products wrap, never promoted to a signed int
          for (std::int64_t j = 0; j < N; ++j) crow[j] = T(U(crow[j]) + U(av) * U(brow[j * vb.strides[2]]));
        } else {
          for (std::int64_t j = 0; j < N; ++j) crow[j] = T(crow[j] + av * brow[j * vb.strides[2]]);
        }
      }
    }
}

// A temporary block from the device pool (runtime/buffer.hpp), freed with it.
struct PoolBlock {
  void* p = nullptr;
  std::size_t bytes = 0;
  void* take(std::size_t b) {
    bytes = std::max<std::size_t>(b, 1);
    return p = rt::device_alloc(bytes);
  }
  PoolBlock() = default;
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;
  ~PoolBlock() {
    if (p) rt::device_free(p, bytes);
  }
};

// An operand's elements, in its (batch, rows, cols) view's order, converted
// by `convert` into a contiguous block from `blk`: the wide copy a GEMM of
// the wider type runs on. Rows in tasks of about 64K elements on the
// product's threads (on one thread, two 4096^2 operands' conversion cost a
// 16-core host a quarter of the product's time).
template <class Out, class In, class F>
const Out* widened(const void* src, const Operand3& v, PoolBlock& blk, F convert, const gemm::ParallelFor& parallel) {
  const std::int64_t rows = v.dims[0] * v.dims[1], cols = v.dims[2];
  Out* dst = static_cast<Out*>(blk.take(std::size_t(rows * cols) * sizeof(Out)));
  const auto* s = static_cast<const In*>(src);
  const std::int64_t per = std::max<std::int64_t>(1, (std::int64_t(1) << 16) / std::max<std::int64_t>(1, cols));
  const std::int64_t tasks = rows == 0 ? 0 : (rows + per - 1) / per;
  auto body = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t r = t0 * per; r < std::min(rows, t1 * per); ++r) {
      const std::int64_t i = r / v.dims[1], j = r % v.dims[1];
      const In* row = s + i * v.strides[0] + j * v.strides[1];
      Out* out = dst + r * cols;
      for (std::int64_t k = 0; k < cols; ++k) out[k] = convert(row[k * v.strides[2]]);
    }
  };
  if (tasks <= 1) body(0, tasks);
  else parallel(tasks, body);
  return dst;
}

class DotThunk final : public rt::Thunk {
 public:
  DotThunk(const Node& n, int lhs, int rhs, int out, int threads) : lhs_(lhs), rhs_(rhs), out_(out), threads_(threads) {
    const auto& d = n.attr<attr::Dot>().dims;
    const Shape& a = n.in[0]->shape();
    const Shape& b = n.in[1]->shape();
    dtype_ = n.dtype();
    in_dtype_ = n.in[0]->dtype();
    rhs_dtype_ = n.in[1]->dtype();
    va_ = view(a, d.lhs_batch, free_dims(int(a.size()), d.lhs_batch, d.lhs_contract), d.lhs_contract);
    vb_ = view(b, d.rhs_batch, d.rhs_contract, free_dims(int(b.size()), d.rhs_batch, d.rhs_contract));
    std::ostringstream os;
    os << "dot " << n.in[0]->aval.str() << " x " << n.in[1]->aval.str() << " -> " << n.aval.str() << " as ["
       << va_.dims[0] << ',' << va_.dims[1] << ',' << va_.dims[2] << "]x[" << vb_.dims[1] << ',' << vb_.dims[2] << ']'
       << (uses_gemm() ? std::string(" (gemm ") +
                             (in_dtype_ == DType::bfloat16 ? (amx_native() ? "amx_bf16" : bf16_native() ? "avx512_bf16" : "bf16 via f32")
                              : bytes()                    ? (vnni_native() ? "avx512_vnni" : "int8 via int32")
                                                           : gemm::isa_name(gemm::best_isa())) +
                             ")"
                       : std::string(" (loop)"))
       << (va_.needs_copy ? " lhs-copy" : "") << (vb_.needs_copy ? " rhs-copy" : "");
    text_ = os.str();
    if (uses_gemm()) {
      // Large products run on the whole host, one at a time; where that does
      // not pay, only when nothing else computes (runtime/device.hpp, ComputeSlot).
      const double flops = 2.0 * double(va_.dims[0]) * double(va_.dims[1]) * double(va_.dims[2]) * double(vb_.dims[2]);
      if (flops >= kMachineWideFlops) {
        width_ = machine_wide_width();
        text_ += std::string(" ") + width_words(width_);
      }
    }
  }

  rt::ComputeSlot::Width width() const override { return width_; }

  void run(rt::ExecContext& ctx) const override {
    const void* a = ctx.slots[lhs_];
    const void* b = ctx.slots[rhs_];
    void* c = ctx.slots[out_];
    const std::size_t es = dtype_size(in_dtype_);
    // Operands in the product's order: blocks from the device pool, reused
    // from call to call (a std::vector's fresh pages were faulted in every
    // call of the MLP step's backward products).
    PoolBlock acopy, bcopy;
    if (va_.needs_copy) {
      void* p = acopy.take(std::size_t(numel(va_.shape)) * es);
      permute_copy(a, p, va_.shape, va_.perm, es);
      a = p;
    }
    if (vb_.needs_copy) {
      void* p = bcopy.take(std::size_t(numel(vb_.shape)) * es);
      permute_copy(b, p, vb_.shape, vb_.perm, es);
      b = p;
    }
    if (in_dtype_ == DType::bfloat16) return run_bf16(a, b, static_cast<float*>(c), ctx.machine_wide);
    if (bytes()) return run_bytes(a, b, static_cast<std::int32_t*>(c), ctx.machine_wide);
    if (dtype_ == DType::float32)
      return run_gemm(static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(c),
                      ctx.machine_wide);
    if (dtype_ == DType::float64)
      return run_gemm(static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(c),
                      ctx.machine_wide);
    if (dtype_ == DType::int32 || dtype_ == DType::uint32)  // wrapping: the same bits unsigned
      return run_gemm(static_cast<const std::uint32_t*>(a), static_cast<const std::uint32_t*>(b),
                      static_cast<std::uint32_t*>(c), ctx.machine_wide);
    if (dtype_ == DType::int64 || dtype_ == DType::uint64)
      return run_gemm(static_cast<const std::uint64_t*>(a), static_cast<const std::uint64_t*>(b),
                      static_cast<std::uint64_t*>(c), ctx.machine_wide);
    visit_wide_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      loop_matmul(static_cast<const T*>(a), va_, static_cast<const T*>(b), vb_, static_cast<T*>(c));
    });
  }

  std::string describe() const override { return text_; }
  const char* category() const override { return "dot"; }
  bool pure() const override { return true; }

 private:
  bool uses_gemm() const {
    return in_dtype_ == DType::bfloat16 || bytes() || dtype_ == DType::float32 || dtype_ == DType::float64 || dtype_ == DType::int32 || dtype_ == DType::uint32 ||
           dtype_ == DType::int64 || dtype_ == DType::uint64;
  }

  // bfloat16 x bfloat16 -> float32 (the mixed dot of codegen/narrow_ops.hpp):
  // on AVX512_BF16's dot-product instruction, else through float32 copies.
  void run_bf16(const void* a, const void* b, float* c, bool wide) const {
    if (amx_native() || bf16_native()) {
      gemm::OperandsBf16 op;
      op.batch = va_.dims[0], op.m = va_.dims[1], op.k = va_.dims[2], op.n = vb_.dims[2];
      op.a = static_cast<const std::uint16_t*>(a), op.a_bs = va_.strides[0], op.a_rs = va_.strides[1], op.a_cs = va_.strides[2];
      op.b = static_cast<const std::uint16_t*>(b), op.b_bs = vb_.strides[0], op.b_rs = vb_.strides[1], op.b_cs = vb_.strides[2];
      op.c = c;
      gemm::ParallelFor parallel = step_tasks(wide);
      if (amx_native()) return gemm::matmul_bf16_amx(op, threads(wide), gemm::run_parallel, &parallel);
      return gemm::matmul_bf16_avx512(op, threads(wide), gemm::run_parallel, &parallel);
    }
    // Without the instruction: the operands' values as float32 (exact), in
    // their strided layout, then the float32 GEMM.
    auto to_float = [](std::uint16_t x) { return float(bfloat16_t::from_bits(x)); };
    PoolBlock wa, wb;
    const gemm::ParallelFor tasks = step_tasks(wide);
    const float* fa = widened<float, std::uint16_t>(a, va_, wa, to_float, tasks);
    const float* fb = widened<float, std::uint16_t>(b, vb_, wb, to_float, tasks);
    gemm::Operands<float> op;
    op.batch = va_.dims[0], op.m = va_.dims[1], op.k = va_.dims[2], op.n = vb_.dims[2];
    op.a = fa, op.a_bs = op.m * op.k, op.a_rs = op.k, op.a_cs = 1;
    op.b = fb, op.b_bs = op.k * op.n, op.b_rs = op.n, op.b_cs = 1;
    op.c = c;
    gemm::matmul(op, threads(wide), step_tasks(wide));
  }

  // 8-bit integers x 8-bit integers -> int32 (the mixed dot of
  // codegen/narrow_ops.hpp): on AVX512_VNNI's byte dot products, else
  // through int32 copies and the integer GEMM.
  bool bytes() const { return in_dtype_ == DType::int8 || in_dtype_ == DType::uint8; }
  void run_bytes(const void* a, const void* b, std::int32_t* c, bool wide) const {
    if (vnni_native()) {
      gemm::OperandsI8 op;
      op.batch = va_.dims[0], op.m = va_.dims[1], op.k = va_.dims[2], op.n = vb_.dims[2];
      op.a = static_cast<const std::uint8_t*>(a), op.a_bs = va_.strides[0], op.a_rs = va_.strides[1], op.a_cs = va_.strides[2];
      op.b = static_cast<const std::uint8_t*>(b), op.b_bs = vb_.strides[0], op.b_rs = vb_.strides[1], op.b_cs = vb_.strides[2];
      op.a_signed = in_dtype_ == DType::int8, op.b_signed = rhs_dtype_ == DType::int8;
      op.c = c;
      gemm::ParallelFor parallel = step_tasks(wide);
      return gemm::matmul_int8_avx512vnni(op, threads(wide), gemm::run_parallel, &parallel);
    }
    auto from_int8 = [](std::uint8_t x) { return std::uint32_t(std::int32_t(std::int8_t(x))); };
    auto from_uint8 = [](std::uint8_t x) { return std::uint32_t(x); };
    auto widen = [&](const void* src, const Operand3& v, bool sgn, PoolBlock& blk) {
      return sgn ? widened<std::uint32_t, std::uint8_t>(src, v, blk, from_int8, step_tasks(wide))
                 : widened<std::uint32_t, std::uint8_t>(src, v, blk, from_uint8, step_tasks(wide));
    };
    PoolBlock wa, wb;
    gemm::Operands<std::uint32_t> op;
    op.batch = va_.dims[0], op.m = va_.dims[1], op.k = va_.dims[2], op.n = vb_.dims[2];
    op.a = widen(a, va_, in_dtype_ == DType::int8, wa), op.a_bs = op.m * op.k, op.a_rs = op.k, op.a_cs = 1;
    op.b = widen(b, vb_, rhs_dtype_ == DType::int8, wb), op.b_bs = op.k * op.n, op.b_rs = op.n, op.b_cs = 1;
    op.c = reinterpret_cast<std::uint32_t*>(c);
    gemm::matmul(op, threads(wide), step_tasks(wide));
  }
  static bool vnni_native() {
    static const bool yes = host_cpu().has("avx512vnni") && host_cpu().has("avx512f") && host_cpu().has("avx512bw") &&
                            !avx512_disabled();
    return yes;
  }

  // AMX tiles where the CPU has them and the OS grants them (gemm_bf16.hpp):
  // 16 x 16 x 32 products an instruction, on Sapphire and Emerald Rapids
  // several times the float32 FMAs' rate. TESSEL_NO_AMX=1 (or
  // TESSEL_NO_AVX512=1) keeps them off.
  static bool amx_native() {
    static const bool yes = [] {
      const char* off = std::getenv("TESSEL_NO_AMX");
      if (off && *off && std::string(off) != "0") return false;
      return host_cpu().has("amx-tile") && host_cpu().has("amx-bf16") && host_cpu().has("avx512bf16") &&
             host_cpu().has("avx512bw") && !avx512_disabled() && gemm::amx_bf16_usable();
    }();
    return yes;
  }
  // The dot-product instruction where it outruns the float32 FMAs: measured
  // once (gemm_bf16.hpp). On this project's Emerald Rapids host it runs at
  // half their rate (4096^3: 82 GFLOP/s a core against the float32 GEMM's
  // 154), so there, without AMX, the float32 GEMM on converted operands runs them.
  static bool bf16_native() {
    static const bool yes = host_cpu().has("avx512bf16") && host_cpu().has("avx512f") && !avx512_disabled() &&
                            gemm::bf16_dot_rate_over_fma() >= 1.25;
    return yes;
  }

  // The GEMMs' threads: the whole host's for a machine-wide turn, else the device's (tasks: step_tasks).
  int threads(bool wide) const { return wide ? rt::ComputeSlot::machine_threads() : threads_; }

  template <class T>
  void run_gemm(const T* a, const T* b, T* c, bool wide) const {
    gemm::Operands<T> op;
    op.batch = va_.dims[0], op.m = va_.dims[1], op.k = va_.dims[2], op.n = vb_.dims[2];
    op.a = a, op.a_bs = va_.strides[0], op.a_rs = va_.strides[1], op.a_cs = va_.strides[2];
    op.b = b, op.b_bs = vb_.strides[0], op.b_rs = vb_.strides[1], op.b_cs = vb_.strides[2];
    op.c = c;
    gemm::matmul(op, threads(wide), step_tasks(wide));
  }

  // A 512^3 product: below it a dot is too short to be worth a host-wide turn.
  static constexpr double kMachineWideFlops = 2.0 * 512 * 512 * 512;
  int lhs_, rhs_, out_, threads_;
  rt::ComputeSlot::Width width_ = rt::ComputeSlot::Width::device;
  DType dtype_, in_dtype_, rhs_dtype_;
  Operand3 va_, vb_;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> make_dot_thunk(const Node& dot, int lhs, int rhs, int out, int threads) {
  return std::make_unique<DotThunk>(dot, lhs, rhs, out, threads);
}

}  // namespace tessel::codegen
