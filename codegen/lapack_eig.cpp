// The eig thunk (eig_routine): LAPACK's ?geev for each matrix of the batch
// a device holds, on its own thread, as the other LAPACK thunks
// (codegen/lapack.cpp). Its results are complex for every input (packed:
// [..., 2] of the real dtype); its input is packed when complex, which the
// complex expansion (tracer/rules_eig.cpp) shows by one more dim than the
// packed eigenvalues. The eigenvectors are always computed, so that the
// eigenvalues come out of one path, in one order, whether or not they are
// asked for (eig's derivative pairs the two).
#include <complex>
#include <sstream>

#include "codegen/lapack_internal.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

using namespace lapack_internal;

class EigThunk final : public rt::Thunk {
 public:
  EigThunk(const Node& n, std::vector<int> reads, std::vector<int> writes)
      : reads_(std::move(reads)), writes_(std::move(writes)), vectors_(n.attr<attr::Linalg>().compute_uv),
        dtype_(n.in[0]->dtype()) {
    const Shape& x = n.in[0]->shape();
    const Shape& w = n.aval.elements.at(0).shape;  // [..., n, 2]
    complex_in_ = x.size() == w.size() + 1;
    n_ = lapack_int(w[w.size() - 2], n);
    batch_ = numel(Shape(w.begin(), w.end() - 2));
    std::ostringstream os;
    os << "eig " << n.aval.str() << " (LAPACK ?geev, " << batch_ << " matri" << (batch_ == 1 ? "x)" : "ces)");
    text_ = os.str();
  }
  void run(rt::ExecContext& ctx) const override {
    if (dtype_ == DType::float32) run_typed<float>(ctx);
    else run_typed<double>(ctx);
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }

 private:
  template <class Re>
  void run_typed(rt::ExecContext& ctx) const {
    using Cx = std::complex<Re>;
    const std::int64_t n = n_;
    const int ni = n_, ld = std::max(n_, 1);
    Cx* w_all = static_cast<Cx*>(ctx.slots[size_t(writes_.at(0))]);
    Cx* v_all = vectors_ ? static_cast<Cx*>(ctx.slots[size_t(writes_.at(1))]) : nullptr;
    std::vector<Cx> vcol(std::size_t(std::max<std::int64_t>(n * n, 1)));
    for (std::int64_t b = 0; b < batch_; ++b) {
      Cx* w = w_all + b * n;
      if (n == 0) continue;
      int info = 0;
      const char jl = 'N', jr = 'V';
      int one = 1;
      if (complex_in_) {
        const Cx* a = static_cast<const Cx*>(ctx.slots[size_t(reads_[0])]) + b * n * n;
        std::vector<Cx> col(std::size_t(n * n));
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) col[std::size_t(j * n + i)] = a[i * n + j];
        std::vector<Re> rwork(std::size_t(2 * n));
        Cx wq, dummy;
        auto geev = [&](Cx* work, int lw) {
          if constexpr (std::is_same_v<Re, float>)
            cgeev_(&jl, &jr, &ni, col.data(), &ld, w, &dummy, &one, vcol.data(), &ld, work, &lw, rwork.data(), &info, 1, 1);
          else
            zgeev_(&jl, &jr, &ni, col.data(), &ld, w, &dummy, &one, vcol.data(), &ld, work, &lw, rwork.data(), &info, 1, 1);
        };
        locked([&] { geev(&wq, -1); });
        std::vector<Cx> work(std::size_t(std::max<Re>(wq.real(), 1)));
        locked([&] { geev(work.data(), int(work.size())); });
      } else {
        const Re* a = static_cast<const Re*>(ctx.slots[size_t(reads_[0])]) + b * n * n;
        std::vector<Re> col(static_cast<std::size_t>(n * n)), wr(static_cast<std::size_t>(n)), wi(static_cast<std::size_t>(n)),
            vr(static_cast<std::size_t>(n * n));
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) col[std::size_t(j * n + i)] = a[i * n + j];
        Re wq, dummy;
        auto geev = [&](Re* work, int lw) {
          if constexpr (std::is_same_v<Re, float>)
            sgeev_(&jl, &jr, &ni, col.data(), &ld, wr.data(), wi.data(), &dummy, &one, vr.data(), &ld, work, &lw, &info, 1, 1);
          else
            dgeev_(&jl, &jr, &ni, col.data(), &ld, wr.data(), wi.data(), &dummy, &one, vr.data(), &ld, work, &lw, &info, 1, 1);
        };
        locked([&] { geev(&wq, -1); });
        std::vector<Re> work(std::size_t(std::max<Re>(wq, 1)));
        locked([&] { geev(work.data(), int(work.size())); });
        // A complex pair's vectors are stored as two real columns: re and im.
        for (std::int64_t k = 0; k < n; ++k) {
          w[k] = Cx(wr[std::size_t(k)], wi[std::size_t(k)]);
          if (wi[std::size_t(k)] != 0 && k + 1 < n) {
            for (std::int64_t i = 0; i < n; ++i) {
              const Re re = vr[std::size_t(k * n + i)], im = vr[std::size_t((k + 1) * n + i)];
              vcol[std::size_t(k * n + i)] = Cx(re, im);
              vcol[std::size_t((k + 1) * n + i)] = Cx(re, -im);
            }
            w[k + 1] = Cx(wr[std::size_t(k + 1)], wi[std::size_t(k + 1)]);
            ++k;
          } else {
            for (std::int64_t i = 0; i < n; ++i) vcol[std::size_t(k * n + i)] = Cx(vr[std::size_t(k * n + i)], 0);
          }
        }
      }
      if (info != 0) {
        // Not converged: NaN, as the other LAPACK thunks do.
        fill_nan(w, n);
        if (v_all) fill_nan(v_all + b * n * n, n * n);
        continue;
      }
      if (v_all)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) v_all[b * n * n + i * n + j] = vcol[std::size_t(j * n + i)];
    }
  }

  std::vector<int> reads_, writes_;
  bool vectors_ = false, complex_in_ = false;
  DType dtype_;
  int n_ = 0;
  std::int64_t batch_ = 1;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> eig_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<EigThunk>(n, reads, writes);
}

}  // namespace tessel::codegen
