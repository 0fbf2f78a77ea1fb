#include "codegen/library.hpp"

#include <array>

#include "tracer/errors.hpp"
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

 private:
  int keys_, values_, out_;
  Shape shape_;
  std::int64_t dim_;
  DType kt_, vt_;
};

std::unique_ptr<rt::Thunk> sort_routine(const Node& n, const std::vector<int>& reads, int out) {
  return std::make_unique<SortThunk>(n, reads.at(0), reads.at(1), out);
}

// One entry per op; only Library-family ops have one.
const std::array<LibraryRoutine, kNumOps>& table() {
  static const std::array<LibraryRoutine, kNumOps> t = [] {
    std::array<LibraryRoutine, kNumOps> r{};
    r[std::size_t(Op::sort)] = &sort_routine;
    return r;
  }();
  return t;
}

}  // namespace

LibraryRoutine library_routine(Op op) { return table()[std::size_t(op)]; }

std::unique_ptr<rt::Thunk> library_thunk(const Node& n, const std::vector<int>& reads, int out) {
  LibraryRoutine r = library_routine(n.op);
  TESSEL_CHECK_INTERNAL(r && op_family(n.op) == OpFamily::Library, "no library routine for ", op_name(n.op));
  return r(n, reads, out);
}

}  // namespace tessel::codegen
