#include "codegen/fft.hpp"

#include <fftw3.h>

#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

using detail::cat;

// FFTW's planner is not thread-safe: every plan is made (and destroyed)
// under this lock. Executing a plan with the new-array functions is safe
// from any thread.
std::mutex& planner_lock() {
  static std::mutex m;
  return m;
}

// A plan's identity: kind, precision, the logical shapes, the axes and the
// arrays' alignments (a plan may only run on arrays aligned as its own).
using PlanKey = std::tuple<int, bool, Shape, Shape, std::vector<std::int64_t>, int, int>;

struct PlanCache {
  std::map<PlanKey, void*> plans;  // fftwf_plan or fftw_plan; never destroyed (reused for the process)
};
PlanCache& cache() {
  static auto* c = new PlanCache;  // outlives threads that may still run at exit
  return *c;
}

class FftThunk final : public rt::Thunk {
 public:
  FftThunk(const Node& n, int in, int out) : p_(n.attr<attr::Fft>()), in_slot_(in), out_slot_(out) {
    const bool cin = p_.kind != attr::FftKind::rfft, cout = p_.kind != attr::FftKind::irfft;
    // Packed complex arrays have a trailing dim of 2 (codegen/complex.cpp).
    in_ = n.in[0]->shape();
    out_ = n.shape();
    if (cin) in_.pop_back();
    if (cout) out_.pop_back();
    single_ = n.dtype() == DType::float32;
    std::ostringstream os;
    os << "fft " << n.aval.str() << " (FFTW";
    p_.print(os);
    os << ')';
    text_ = os.str();
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }
  void run(rt::ExecContext& ctx) const override {
    if (numel(in_) == 0 || numel(out_) == 0) return;
    if (single_) run_typed<float>(ctx);
    else run_typed<double>(ctx);
  }

 private:
  template <class R>
  void run_typed(rt::ExecContext& ctx) const {
    void* in = ctx.slots[size_t(in_slot_)];
    void* out = ctx.slots[size_t(out_slot_)];
    // c2r overwrites its input: it runs on a copy.
    if (p_.kind == attr::FftKind::irfft) {
      const std::size_t bytes = std::size_t(numel(in_)) * 2 * sizeof(R);
      void* buf = fftw_malloc(bytes);
      std::memcpy(buf, in, bytes);
      execute<R>(buf, out);
      fftw_free(buf);
      return;
    }
    execute<R>(in, out);
  }

  template <class R>
  void execute(void* in, void* out) const {
    constexpr bool single = std::is_same_v<R, float>;
    const int ain = single ? fftwf_alignment_of(static_cast<float*>(in)) : fftw_alignment_of(static_cast<double*>(in));
    const int aout = single ? fftwf_alignment_of(static_cast<float*>(out)) : fftw_alignment_of(static_cast<double*>(out));
    PlanKey key{int(p_.kind), single, in_, out_, p_.axes, ain, aout};
    void* plan = nullptr;
    {
      std::lock_guard<std::mutex> lock(planner_lock());
      auto& plans = cache().plans;
      auto it = plans.find(key);
      if (it != plans.end()) plan = it->second;
      else {
        plan = make_plan<R>(in, out);
        if (!plan) throw InternalError(cat("FFTW could not plan ", text_));
        plans.emplace(key, plan);
      }
    }
    if constexpr (single) {
      auto pl = static_cast<fftwf_plan>(plan);
      switch (p_.kind) {
        case attr::FftKind::fft:
        case attr::FftKind::ifft:
          fftwf_execute_dft(pl, static_cast<fftwf_complex*>(in), static_cast<fftwf_complex*>(out));
          break;
        case attr::FftKind::rfft: fftwf_execute_dft_r2c(pl, static_cast<float*>(in), static_cast<fftwf_complex*>(out)); break;
        case attr::FftKind::irfft: fftwf_execute_dft_c2r(pl, static_cast<fftwf_complex*>(in), static_cast<float*>(out)); break;
      }
    } else {
      auto pl = static_cast<fftw_plan>(plan);
      switch (p_.kind) {
        case attr::FftKind::fft:
        case attr::FftKind::ifft:
          fftw_execute_dft(pl, static_cast<fftw_complex*>(in), static_cast<fftw_complex*>(out));
          break;
        case attr::FftKind::rfft: fftw_execute_dft_r2c(pl, static_cast<double*>(in), static_cast<fftw_complex*>(out)); break;
        case attr::FftKind::irfft: fftw_execute_dft_c2r(pl, static_cast<fftw_complex*>(in), static_cast<double*>(out)); break;
      }
    }
  }

  // The guru interface: the transformed axes as `dims`, every other axis a
  // loop (`howmany`), strides in elements of each array's own type. FFTW's
  // "n" of the real transforms' last axis is the real length. FFTW_ESTIMATE
  // never touches the arrays, so the plan is made on the arrays it will run.
  template <class R>
  void* make_plan(void* in, void* out) const {
    constexpr bool single = std::is_same_v<R, float>;
    const auto is = row_major_strides(in_), os = row_major_strides(out_);  // in elements
    const Shape& logical = p_.kind == attr::FftKind::irfft ? out_ : in_;
    std::vector<fftw_iodim64> dims, loops;
    std::vector<bool> transformed(in_.size(), false);
    for (auto a : p_.axes) {
      transformed[size_t(a)] = true;
      dims.push_back({logical[size_t(a)], is[size_t(a)], os[size_t(a)]});
    }
    for (size_t d = 0; d < in_.size(); ++d)
      if (!transformed[d]) loops.push_back({in_[d], is[d], os[d]});
    const unsigned flags = FFTW_ESTIMATE;
    const int rank = int(dims.size()), hr = int(loops.size());
    if constexpr (single) {
      auto* d = reinterpret_cast<fftwf_iodim64*>(dims.data());
      auto* l = reinterpret_cast<fftwf_iodim64*>(loops.data());
      switch (p_.kind) {
        case attr::FftKind::fft:
        case attr::FftKind::ifft:
          return fftwf_plan_guru64_dft(rank, d, hr, l, static_cast<fftwf_complex*>(in), static_cast<fftwf_complex*>(out),
                                       p_.kind == attr::FftKind::fft ? FFTW_FORWARD : FFTW_BACKWARD, flags);
        case attr::FftKind::rfft:
          return fftwf_plan_guru64_dft_r2c(rank, d, hr, l, static_cast<float*>(in), static_cast<fftwf_complex*>(out), flags);
        case attr::FftKind::irfft:
          return fftwf_plan_guru64_dft_c2r(rank, d, hr, l, static_cast<fftwf_complex*>(in), static_cast<float*>(out), flags);
      }
    } else {
      switch (p_.kind) {
        case attr::FftKind::fft:
        case attr::FftKind::ifft:
          return fftw_plan_guru64_dft(rank, dims.data(), hr, loops.data(), static_cast<fftw_complex*>(in),
                                      static_cast<fftw_complex*>(out),
                                      p_.kind == attr::FftKind::fft ? FFTW_FORWARD : FFTW_BACKWARD, flags);
        case attr::FftKind::rfft:
          return fftw_plan_guru64_dft_r2c(rank, dims.data(), hr, loops.data(), static_cast<double*>(in),
                                          static_cast<fftw_complex*>(out), flags);
        case attr::FftKind::irfft:
          return fftw_plan_guru64_dft_c2r(rank, dims.data(), hr, loops.data(), static_cast<fftw_complex*>(in),
                                          static_cast<double*>(out), flags);
      }
    }
    return nullptr;
  }

  attr::Fft p_;
  int in_slot_, out_slot_;
  Shape in_, out_;  // logical shapes (complex arrays without their trailing 2)
  bool single_ = true;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> fft_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<FftThunk>(n, reads.at(0), writes.at(0));
}

}  // namespace tessel::codegen
