#include "codegen/library.hpp"

#include <array>

#include "codegen/fft.hpp"
#include "codegen/lapack.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

// sort(keys, values) along one dim: a stable sort of each line.
class SortThunk final : public rt::Thunk {
 public:
  SortThunk(const Node& n, int keys, int values, int out)
      : keys_(keys), values_(values), out_(out), shape_(n.shape()), dim_(n.attr<attr::Dimension>().dimension), kt_(n.in[0]->dtype()),
        vt_(n.dtype()) {}
  void run(rt::ExecContext& ctx) const override {
    sort_lines(kt_, vt_, shape_, dim_, ctx.slots[keys_], ctx.slots[values_], ctx.slots[out_]);
  }
  std::string describe() const override { return "sort " + aval_str(vt_, shape_) + " (stable)"; }
  const char* category() const override { return "library"; }

 private:
  int keys_, values_, out_;
  Shape shape_;
  std::int64_t dim_;
  DType kt_, vt_;
};

std::unique_ptr<rt::Thunk> sort_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<SortThunk>(n, reads.at(0), reads.at(1), writes.at(0));
}

// scatter: x with the updates combined in (the interpreter's kernel).
class ScatterThunk final : public rt::Thunk {
 public:
  ScatterThunk(const Node& n, int x, int idx, int upd, int out)
      : x_(x), idx_(idx), upd_(upd), out_(out), how_(n.attr<attr::Indexed>()), shape_(n.shape()), dtype_(n.dtype()),
        idx_shape_(n.in[1]->shape()), idx_dtype_(n.in[1]->dtype()) {}
  void run(rt::ExecContext& ctx) const override {
    scatter_kernel(how_, dtype_, shape_, idx_dtype_, idx_shape_, ctx.slots[x_], ctx.slots[idx_], ctx.slots[upd_],
                   ctx.slots[out_]);
  }
  std::string describe() const override {
    return std::string("scatter-") + op_name(how_.combine) + " " + aval_str(dtype_, shape_) + " at " +
           aval_str(idx_dtype_, idx_shape_);
  }
  const char* category() const override { return "library"; }

 private:
  int x_, idx_, upd_, out_;
  attr::Indexed how_;
  Shape shape_;
  DType dtype_;
  Shape idx_shape_;
  DType idx_dtype_;
};

std::unique_ptr<rt::Thunk> scatter_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<ScatterThunk>(n, reads.at(0), reads.at(1), reads.at(2), writes.at(0));
}

// One entry per op; only Library-family ops have one.
const std::array<LibraryRoutine, kNumOps>& table() {
  static const std::array<LibraryRoutine, kNumOps> t = [] {
    std::array<LibraryRoutine, kNumOps> r{};
    r[std::size_t(Op::sort)] = &sort_routine;
    r[std::size_t(Op::scatter)] = &scatter_routine;
    for (Op op : {Op::cholesky, Op::triangular_solve, Op::lu, Op::qr, Op::eigh, Op::svd}) r[std::size_t(op)] = &lapack_routine;
    r[std::size_t(Op::fft)] = &fft_routine;
    return r;
  }();
  return t;
}

}  // namespace

LibraryRoutine library_routine(Op op) { return table()[std::size_t(op)]; }

std::unique_ptr<rt::Thunk> library_thunk(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  LibraryRoutine r = library_routine(n.op);
  TESSEL_CHECK_INTERNAL(r && op_family(n.op) == OpFamily::Library, "no library routine for ", op_name(n.op));
  return r(n, reads, writes);
}

}  // namespace tessel::codegen
