#include "codegen/fft.hpp"

#include <fftw3.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "codegen/library.hpp"
#include "runtime/device.hpp"
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

// One FFTW guru transform: its kind, precision, transformed dims and loop
// dims (sizes and strides in elements of each array's own type), whether it
// runs in place, and the arrays' alignments (a plan may only run on arrays
// aligned as its own). The plan cache's key.
enum class Xform { c2c_forward, c2c_backward, r2c, c2r };
struct IoDim {
  std::int64_t n, is, os;
  auto operator<=>(const IoDim&) const = default;
};
using PlanKey = std::tuple<Xform, bool, std::vector<IoDim>, std::vector<IoDim>, bool, int, int>;

struct PlanCache {
  std::map<PlanKey, void*> plans;  // fftwf_plan or fftw_plan; never destroyed (reused for the process)
};
PlanCache& cache() {
  static auto* c = new PlanCache;  // outlives threads that may still run at exit
  return *c;
}

// A transform is run as phases, each one guru transform whose first loop
// dim is cut into blocks that run in parallel on the device's threads.
// Arrays: the input (for c2r, a copy FFTW may overwrite) and the output.
struct Phase {
  Xform x;
  std::vector<IoDim> dims, loops;
  bool src_is_input, dst_is_input;
};

// How many blocks a phase's first loop is cut into: a fixed number, so the
// plans (and the bits) depend on the shape only, never on the thread count.
constexpr std::int64_t kBlocks = 64;
// Transforms smaller than this run as one plan on one thread.
constexpr std::int64_t kParallelElements = std::int64_t(1) << 15;
// Transforms at least this large ask for every core (as large dots do).
constexpr std::int64_t kMachineWideElements = std::int64_t(1) << 20;

Xform xform_of(attr::FftKind k) {
  switch (k) {
    case attr::FftKind::fft: return Xform::c2c_forward;
    case attr::FftKind::ifft: return Xform::c2c_backward;
    case attr::FftKind::rfft: return Xform::r2c;
    case attr::FftKind::irfft: return Xform::c2r;
  }
  return Xform::c2c_forward;
}

// The largest loop first (the one cut into blocks).
void largest_loop_first(std::vector<IoDim>& loops) {
  auto it = std::max_element(loops.begin(), loops.end(), [](const IoDim& a, const IoDim& b) { return a.n < b.n; });
  if (it != loops.end()) std::rotate(loops.begin(), it, it + 1);
}

// The phases of an fft node: one guru plan (its loops cut into blocks), or,
// for a multi-axis transform with no loop (an fftn of the whole array), the
// axes split into two passes that each have a loop: c2c: the inner axes
// in -> out, then the first axis in place on out; r2c: the halved axis
// in -> out, then the others in place on out; c2r: the others in place on
// the copy, then the halved axis copy -> out.
std::vector<Phase> phases_of(const attr::Fft& p, const Shape& in, const Shape& out) {
  const auto is = row_major_strides(in), os = row_major_strides(out);
  const Shape& logical = p.kind == attr::FftKind::irfft ? out : in;
  const Xform x = xform_of(p.kind);
  std::vector<bool> transformed(in.size(), false);
  for (auto a : p.axes) transformed[size_t(a)] = true;
  Phase whole{x, {}, {}, true, false};
  for (auto a : p.axes) whole.dims.push_back({logical[size_t(a)], is[size_t(a)], os[size_t(a)]});
  for (size_t d = 0; d < in.size(); ++d)
    if (!transformed[d]) whole.loops.push_back({in[d], is[d], os[d]});
  if (numel(logical) < kParallelElements || (whole.loops.empty() && p.axes.size() < 2)) {
    whole.loops.insert(whole.loops.begin(), IoDim{1, 0, 0});  // one block
    return {whole};
  }
  if (!whole.loops.empty()) {
    largest_loop_first(whole.loops);
    return {whole};
  }
  // Every axis transformed: two passes.
  const std::size_t a0 = size_t(p.axes.front()), h = size_t(p.axes.back());  // h: the halved axis of r2c/c2r
  auto pass = [&](Xform px, const std::vector<std::size_t>& axes, const Shape& shape, const std::vector<std::int64_t>& s,
                  const std::vector<std::int64_t>& d, bool src_in, bool dst_in) {
    Phase ph{px, {}, {}, src_in, dst_in};
    std::vector<bool> t(shape.size(), false);
    for (auto a : axes) t[a] = true, ph.dims.push_back({px == Xform::c2r || px == Xform::r2c ? logical[a] : shape[a], s[a], d[a]});
    for (size_t k = 0; k < shape.size(); ++k)
      if (!t[k]) ph.loops.push_back({shape[k], s[k], d[k]});
    largest_loop_first(ph.loops);
    return ph;
  };
  std::vector<std::size_t> rest;
  switch (x) {
    case Xform::c2c_forward:
    case Xform::c2c_backward:
      for (size_t k = 1; k < p.axes.size(); ++k) rest.push_back(size_t(p.axes[k]));
      return {pass(x, rest, in, is, os, true, false), pass(x, {a0}, out, os, os, false, false)};
    case Xform::r2c:
      for (size_t k = 0; k + 1 < p.axes.size(); ++k) rest.push_back(size_t(p.axes[k]));
      return {pass(Xform::r2c, {h}, in, is, os, true, false), pass(Xform::c2c_forward, rest, out, os, os, false, false)};
    case Xform::c2r:
      for (size_t k = 0; k + 1 < p.axes.size(); ++k) rest.push_back(size_t(p.axes[k]));
      return {pass(Xform::c2c_backward, rest, in, is, is, true, true), pass(Xform::c2r, {h}, in, is, os, true, false)};
  }
  return {whole};
}

// FFTW's planner makes a plan for `key`'s transform on these arrays
// (FFTW_ESTIMATE never touches them). Called with the planner lock.
template <class R>
void* make_plan(const PlanKey& key, void* in, void* out) {
  constexpr bool single = std::is_same_v<R, float>;
  const auto& [x, sgl, dims_v, loops_v, in_place, ain, aout] = key;
  std::vector<fftw_iodim64> dims, loops;
  for (auto& d : dims_v) dims.push_back({d.n, d.is, d.os});
  for (auto& d : loops_v) loops.push_back({d.n, d.is, d.os});
  const unsigned flags = FFTW_ESTIMATE;
  const int rank = int(dims.size()), hr = int(loops.size());
  if constexpr (single) {
    auto* d = reinterpret_cast<fftwf_iodim64*>(dims.data());
    auto* l = reinterpret_cast<fftwf_iodim64*>(loops.data());
    switch (x) {
      case Xform::c2c_forward:
      case Xform::c2c_backward:
        return fftwf_plan_guru64_dft(rank, d, hr, l, static_cast<fftwf_complex*>(in), static_cast<fftwf_complex*>(out),
                                     x == Xform::c2c_forward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
      case Xform::r2c:
        return fftwf_plan_guru64_dft_r2c(rank, d, hr, l, static_cast<float*>(in), static_cast<fftwf_complex*>(out), flags);
      case Xform::c2r:
        return fftwf_plan_guru64_dft_c2r(rank, d, hr, l, static_cast<fftwf_complex*>(in), static_cast<float*>(out), flags);
    }
  } else {
    switch (x) {
      case Xform::c2c_forward:
      case Xform::c2c_backward:
        return fftw_plan_guru64_dft(rank, dims.data(), hr, loops.data(), static_cast<fftw_complex*>(in),
                                    static_cast<fftw_complex*>(out), x == Xform::c2c_forward ? FFTW_FORWARD : FFTW_BACKWARD,
                                    flags);
      case Xform::r2c:
        return fftw_plan_guru64_dft_r2c(rank, dims.data(), hr, loops.data(), static_cast<double*>(in),
                                        static_cast<fftw_complex*>(out), flags);
      case Xform::c2r:
        return fftw_plan_guru64_dft_c2r(rank, dims.data(), hr, loops.data(), static_cast<fftw_complex*>(in),
                                        static_cast<double*>(out), flags);
    }
  }
  return nullptr;
}

template <class R>
void execute_plan(Xform x, void* plan, void* in, void* out) {
  if constexpr (std::is_same_v<R, float>) {
    auto pl = static_cast<fftwf_plan>(plan);
    switch (x) {
      case Xform::c2c_forward:
      case Xform::c2c_backward:
        fftwf_execute_dft(pl, static_cast<fftwf_complex*>(in), static_cast<fftwf_complex*>(out));
        break;
      case Xform::r2c: fftwf_execute_dft_r2c(pl, static_cast<float*>(in), static_cast<fftwf_complex*>(out)); break;
      case Xform::c2r: fftwf_execute_dft_c2r(pl, static_cast<fftwf_complex*>(in), static_cast<float*>(out)); break;
    }
  } else {
    auto pl = static_cast<fftw_plan>(plan);
    switch (x) {
      case Xform::c2c_forward:
      case Xform::c2c_backward:
        fftw_execute_dft(pl, static_cast<fftw_complex*>(in), static_cast<fftw_complex*>(out));
        break;
      case Xform::r2c: fftw_execute_dft_r2c(pl, static_cast<double*>(in), static_cast<fftw_complex*>(out)); break;
      case Xform::c2r: fftw_execute_dft_c2r(pl, static_cast<fftw_complex*>(in), static_cast<double*>(out)); break;
    }
  }
}

class FftThunk final : public rt::Thunk {
 public:
  FftThunk(const Node& n, int in, int out) : p_(n.attr<attr::Fft>()), in_slot_(in), out_slot_(out) {
    const bool cin = p_.kind != attr::FftKind::rfft, cout = p_.kind != attr::FftKind::irfft;
    // Packed complex arrays have a trailing dim of 2 (codegen/complex.cpp).
    Shape in_shape = n.in[0]->shape(), out_shape = n.shape();
    if (cin) in_shape.pop_back();
    if (cout) out_shape.pop_back();
    in_elements_ = numel(in_shape);
    out_elements_ = numel(out_shape);
    single_ = n.dtype() == DType::float32;
    phases_ = phases_of(p_, in_shape, out_shape);
    std::ostringstream os;
    os << "fft " << n.aval.str() << " (FFTW";
    p_.print(os);
    if (phases_.size() > 1) os << ", " << phases_.size() << " passes";
    if (phases_.front().loops.front().n > 1) os << ", in blocks";
    const std::int64_t logical = std::max(in_elements_, out_elements_);
    if (logical >= kMachineWideElements) {
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
  void run(rt::ExecContext& ctx) const override {
    if (in_elements_ == 0 || out_elements_ == 0) return;
    if (single_) run_typed<float>(ctx);
    else run_typed<double>(ctx);
  }

 private:
  template <class R>
  void run_typed(rt::ExecContext& ctx) const {
    void* in = ctx.slots[size_t(in_slot_)];
    void* out = ctx.slots[size_t(out_slot_)];
    // c2r overwrites its input: it runs on a copy.
    void* buf = nullptr;
    if (p_.kind == attr::FftKind::irfft) {
      const std::size_t bytes = std::size_t(in_elements_) * 2 * sizeof(R);
      buf = fftw_malloc(bytes);
      if (!buf) throw ResourceExhaustedError(cat("RESOURCE_EXHAUSTED: FFTW could not allocate ", bytes, " bytes for ", text_));
      std::memcpy(buf, in, bytes);
      in = buf;
    }
    try {
      for (auto& ph : phases_) run_phase<R>(ctx, ph, ph.src_is_input ? in : out, ph.dst_is_input ? in : out);
    } catch (...) {
      if (buf) fftw_free(buf);
      throw;
    }
    if (buf) fftw_free(buf);
  }

  // One phase: its first loop cut into kBlocks blocks (fewer when shorter),
  // each a plan of its own length on the arrays at the block's offset.
  template <class R>
  void run_phase(rt::ExecContext& ctx, const Phase& ph, void* src, void* dst) const {
    const std::size_t src_es = ph.x == Xform::r2c ? sizeof(R) : 2 * sizeof(R);
    const std::size_t dst_es = ph.x == Xform::c2r ? sizeof(R) : 2 * sizeof(R);
    const std::int64_t L = ph.loops.front().n, nb = std::min(L, kBlocks);
    auto block = [&](std::int64_t b) {
      const std::int64_t lo = L * b / nb, hi = L * (b + 1) / nb;
      char* s = static_cast<char*>(src) + std::size_t(lo * ph.loops.front().is) * src_es;
      char* d = static_cast<char*>(dst) + std::size_t(lo * ph.loops.front().os) * dst_es;
      std::vector<IoDim> loops = ph.loops;
      loops.front().n = hi - lo;
      constexpr bool single = std::is_same_v<R, float>;
      auto align = [](void* p) {
        return single ? fftwf_alignment_of(static_cast<float*>(p)) : fftw_alignment_of(static_cast<double*>(p));
      };
      PlanKey key{ph.x, single, ph.dims, std::move(loops), src == dst, align(s), align(d)};
      void* plan = nullptr;
      {
        std::lock_guard<std::mutex> lock(planner_lock());
        auto& plans = cache().plans;
        auto it = plans.find(key);
        if (it != plans.end()) plan = it->second;
        else {
          plan = make_plan<R>(key, s, d);
          if (!plan) throw InternalError(cat("FFTW could not plan ", text_));
          plans.emplace(std::move(key), plan);
        }
      }
      execute_plan<R>(ph.x, plan, s, d);
    };
    if (nb == 1) return block(0);
    auto body = [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) block(b);
    };
    rt::parallel_for(ctx, 0, nb, 1, body);
  }

  attr::Fft p_;
  int in_slot_, out_slot_;
  std::int64_t in_elements_ = 0, out_elements_ = 0;  // logical (complex counted once)
  std::vector<Phase> phases_;
  bool single_ = true;
  rt::ComputeSlot::Width width_ = rt::ComputeSlot::Width::device;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> fft_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<FftThunk>(n, reads.at(0), writes.at(0));
}

}  // namespace tessel::codegen
