#include "codegen/library.hpp"

#include <algorithm>
#include <array>

#include "codegen/conv.hpp"
#include "codegen/fft.hpp"
#include "codegen/lapack.hpp"
#include "runtime/device.hpp"
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
  // Lines spread over the device's threads (the host's when machine-wide).
  void run(rt::ExecContext& ctx) const override {
    const std::int64_t lines = sort_line_count(shape_, dim_);
    const std::int64_t grain = std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, shape_[std::size_t(dim_)]));
    auto chunk = [&](std::int64_t first, std::int64_t last) {
      sort_lines(kt_, vt_, shape_, dim_, ctx.slots[keys_], ctx.slots[values_], ctx.slots[out_], first, last);
    };
    rt::parallel_for(ctx, 0, lines, grain, chunk);
  }
  std::string describe() const override { return "sort " + aval_str(vt_, shape_) + " (stable)"; }
  const char* category() const override { return "library"; }
  bool pure() const override { return true; }
  std::int64_t work() const override { return numel(shape_) * 16; }  // about log2 of a line's length compares
  rt::ComputeSlot::Width width() const override { return rt::width_for_work(work()); }

 private:
  int keys_, values_, out_;
  Shape shape_;
  std::int64_t dim_;
  DType kt_, vt_;
};

std::unique_ptr<rt::Thunk> sort_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<SortThunk>(n, reads.at(0), reads.at(1), writes.at(0));
}

// cumsum, cumprod, cummax, cummin, cumlogsumexp: each line scanned.
class CumulativeThunk final : public rt::Thunk {
 public:
  CumulativeThunk(const Node& n, int in, int out)
      : in_(in), out_(out), op_(n.op), shape_(n.shape()), how_(n.attr<attr::Cumulative>()), dtype_(n.dtype()) {}
  void run(rt::ExecContext& ctx) const override {
    cumulative_lines(op_, dtype_, shape_, how_.dimension, how_.reverse, ctx.slots[in_], ctx.slots[out_]);
  }
  std::string describe() const override {
    return std::string(op_name(op_)) + " " + aval_str(dtype_, shape_) + " along " + std::to_string(how_.dimension) +
           (how_.reverse ? " (reverse)" : "");
  }
  const char* category() const override { return "library"; }
  bool pure() const override { return true; }

 private:
  int in_, out_;
  Op op_;
  Shape shape_;
  attr::Cumulative how_;
  DType dtype_;
};

std::unique_ptr<rt::Thunk> cumulative_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<CumulativeThunk>(n, reads.at(0), writes.at(0));
}

// top_k: each line's k largest values and their indices.
class TopKThunk final : public rt::Thunk {
 public:
  TopKThunk(const Node& n, int in, int values, int indices)
      : in_(in), values_(values), indices_(indices), shape_(n.in[0]->shape()), k_(n.attr<attr::TopK>().k), dtype_(n.in[0]->dtype()) {}
  void run(rt::ExecContext& ctx) const override {
    top_k_lines(dtype_, shape_, k_, ctx.slots[in_], ctx.slots[values_], ctx.slots[indices_]);
  }
  std::string describe() const override { return "top-k " + aval_str(dtype_, shape_) + " k=" + std::to_string(k_); }
  const char* category() const override { return "library"; }
  bool pure() const override { return true; }

 private:
  int in_, values_, indices_;
  Shape shape_;
  std::int64_t k_;
  DType dtype_;
};

std::unique_ptr<rt::Thunk> top_k_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<TopKThunk>(n, reads.at(0), writes.at(0), writes.at(1));
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
  bool pure() const override { return true; }
  // Its operand: each indexed element is read (combined) before it is
  // written, and the copy is skipped when the blocks are one.
  bool may_write_over(std::size_t read, int) const override { return read == 0; }
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

// debug_callback: the host function with the operands' values — on every
// device inside shard_map, else on the launch's first device only (the
// partitioner gave it the whole values). The token it writes is read by nothing.
class DebugCallbackThunk final : public rt::Thunk {
 public:
  DebugCallbackThunk(const Node& n, std::vector<int> reads, int out)
      : how_(n.attr<attr::DebugCallback>()), reads_(std::move(reads)), out_(out) {
    if (how_.ordered) reads_.pop_back();  // the token of the effect before: ordering only
    for (size_t k = 0; k < reads_.size(); ++k) avals_.push_back({n.in[k]->dtype(), n.in[k]->shape()});
    text_ = "debug-callback " + std::to_string(how_.id) + (how_.every_device ? " (every device)" : " (first device)");
  }
  void run(rt::ExecContext& ctx) const override {
    if (out_ >= 0) *static_cast<bool*>(ctx.slots[size_t(out_)]) = false;
    if (!how_.every_device && ctx.position != 0) return;
    std::vector<attr::EffectArg> args;
    for (size_t k = 0; k < reads_.size(); ++k)
      args.push_back(attr::EffectArg{avals_[k].first, avals_[k].second, ctx.slots[size_t(reads_[k])], ctx.device});
    (*how_.fn)(args);
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "callback"; }

 private:
  attr::DebugCallback how_;
  std::vector<int> reads_;
  int out_;
  std::vector<std::pair<DType, Shape>> avals_;
  std::string text_;
};

std::unique_ptr<rt::Thunk> debug_callback_routine(const Node& n, const std::vector<int>& reads,
                                                  const std::vector<int>& writes) {
  return std::make_unique<DebugCallbackThunk>(n, reads, writes.empty() ? -1 : writes.at(0));
}

// host_call: the user's function on this device's blocks, on this
// device's own thread. What it throws becomes a ts::Error naming the call
// and the device; the run then fails as a whole (the launch aborts the
// collectives the other devices wait in, so none hangs).
class HostCallThunk final : public rt::Thunk {
 public:
  HostCallThunk(const Node& n, std::vector<int> reads, std::vector<int> writes)
      : how_(n.attr<attr::HostCall>()), reads_(std::move(reads)), writes_(std::move(writes)) {
    for (auto& x : n.in) in_.push_back({x->dtype(), x->shape()});
    text_ = "custom-call " + how_.name + " (" + std::to_string(how_.id) + ")";
  }
  void run(rt::ExecContext& ctx) const override {
    std::vector<attr::HostCallArg> in, out;
    for (std::size_t k = 0; k < reads_.size(); ++k)
      in.push_back({in_[k].first, in_[k].second, ctx.slots[std::size_t(reads_[k])], ctx.device});
    for (std::size_t k = 0; k < writes_.size(); ++k)
      out.push_back({how_.dtypes[k], how_.shapes[k], ctx.slots[std::size_t(writes_[k])], ctx.device});
    try {
      (*how_.fn)(in, out);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(how_.name + " on device " + std::to_string(ctx.device) + " threw: " + e.what());
    } catch (...) {
      throw Error(how_.name + " on device " + std::to_string(ctx.device) + " threw an exception that is not a std::exception");
    }
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "callback"; }

 private:
  attr::HostCall how_;
  std::vector<int> reads_, writes_;
  std::vector<std::pair<DType, Shape>> in_;
  std::string text_;
};

std::unique_ptr<rt::Thunk> host_call_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<HostCallThunk>(n, reads, writes);
}

// One entry per op; only Library-family ops have one.
const std::array<LibraryRoutine, kNumOps>& table() {
  static const std::array<LibraryRoutine, kNumOps> t = [] {
    std::array<LibraryRoutine, kNumOps> r{};
    r[std::size_t(Op::sort)] = &sort_routine;
    r[std::size_t(Op::scatter)] = &scatter_routine;
    for (Op op : {Op::cumsum, Op::cumprod, Op::cummax, Op::cummin, Op::cumlogsumexp})
      r[std::size_t(op)] = &cumulative_routine;
    r[std::size_t(Op::top_k)] = &top_k_routine;
    for (Op op : {Op::cholesky, Op::triangular_solve, Op::lu, Op::qr, Op::eigh, Op::svd}) r[std::size_t(op)] = &lapack_routine;
    r[std::size_t(Op::eig)] = &eig_routine;
    r[std::size_t(Op::distributed_lu)] = &distributed_lu_routine;
    r[std::size_t(Op::distributed_cholesky)] = &distributed_cholesky_routine;
    r[std::size_t(Op::distributed_triangular_solve)] = &distributed_triangular_solve_routine;
    r[std::size_t(Op::fft)] = &fft_routine;
    r[std::size_t(Op::conv)] = &conv_routine;
    r[std::size_t(Op::debug_callback)] = &debug_callback_routine;
    r[std::size_t(Op::host_call)] = &host_call_routine;
    return r;
  }();
  return t;
}

}  // namespace

LibraryRoutine library_routine(Op op) { return table()[std::size_t(op)]; }

std::size_t library_workspace(const Node& n) {
  if (n.op == Op::distributed_lu) return distributed_lu_workspace(n);
  if (n.op == Op::distributed_cholesky) return distributed_cholesky_workspace(n);
  if (n.op == Op::distributed_triangular_solve) return distributed_triangular_solve_workspace(n);
  if (library_routine(n.op) == &lapack_routine) return lapack_workspace(n);
  if (n.op == Op::conv) return conv_workspace(n);
  return 0;
}

rt::ComputeSlot::Width machine_wide_width() {
  return rt::ComputeSlot::machine_wide_pays() ? rt::ComputeSlot::Width::machine : rt::ComputeSlot::Width::machine_if_idle;
}

gemm::ParallelFor step_tasks(bool machine_wide) {
  return [machine_wide](std::int64_t len, const std::function<void(std::int64_t, std::int64_t)>& task) {
    if (machine_wide) rt::parallel_for_machine(0, len, 1, task);
    else rt::parallel_for(0, len, 1, task);
  };
}

const char* width_words(rt::ComputeSlot::Width w) {
  switch (w) {
    case rt::ComputeSlot::Width::device: return "device-wide";
    case rt::ComputeSlot::Width::machine: return "machine-wide";
    case rt::ComputeSlot::Width::machine_if_idle: return "machine-wide-if-idle";
  }
  return "";
}

std::unique_ptr<rt::Thunk> library_thunk(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  LibraryRoutine r = library_routine(n.op);
  TESSEL_CHECK_INTERNAL(r && op_family(n.op) == OpFamily::Library, "no library routine for ", op_name(n.op));
  return r(n, reads, writes);
}

}  // namespace tessel::codegen
