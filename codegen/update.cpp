#include "codegen/update.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>

#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

// An integer scalar of any integer dtype, as int64 (unsigned values past
// int64's range saturate: they clamp to the last start anyway).
std::int64_t read_index(const void* p, DType t) {
  switch (t) {
    case DType::int8: return *static_cast<const std::int8_t*>(p);
    case DType::int16: return *static_cast<const std::int16_t*>(p);
    case DType::int32: return *static_cast<const std::int32_t*>(p);
    case DType::int64: return *static_cast<const std::int64_t*>(p);
    case DType::uint8: return *static_cast<const std::uint8_t*>(p);
    case DType::uint16: return *static_cast<const std::uint16_t*>(p);
    case DType::uint32: return *static_cast<const std::uint32_t*>(p);
    case DType::uint64: {
      const std::uint64_t v = *static_cast<const std::uint64_t*>(p);
      return v > std::uint64_t(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max()
                                                                          : std::int64_t(v);
    }
    default: throw InternalError(std::string("dynamic_update_slice start of dtype ") + dtype_name(t));
  }
}

class UpdateThunk final : public rt::Thunk {
 public:
  UpdateThunk(const Node& n, std::vector<int> reads, int out)
      : reads_(std::move(reads)), out_(out), shape_(n.shape()), window_(n.in[1]->shape()),
        elem_(dtype_size(n.dtype())) {
    TESSEL_CHECK_INTERNAL(reads_.size() == shape_.size() + 2, "dynamic_update_slice: one start per dim");
    for (std::size_t k = 2; k < n.in.size(); ++k) start_types_.push_back(n.in[k]->dtype());
    bytes_ = std::size_t(numel(shape_)) * elem_;
    std::ostringstream os;
    os << "update " << n.aval.str() << " window=" << n.in[1]->aval.str();
    text_ = os.str();
  }
  void run(rt::ExecContext& ctx) const override {
    char* dst = static_cast<char*>(ctx.slots[std::size_t(out_)]);
    const char* operand = static_cast<const char*>(ctx.slots[std::size_t(reads_[0])]);
    const char* src = static_cast<const char*>(ctx.slots[std::size_t(reads_[1])]);
    // The starts (clamped as XLA clamps), read before anything is written.
    const std::size_t rank = shape_.size();
    std::int64_t offset = 0, stride = 1;
    std::vector<std::int64_t> strides(rank);
    for (std::size_t d = rank; d-- > 0;) {
      strides[d] = stride;
      const std::int64_t s = std::clamp<std::int64_t>(
          read_index(ctx.slots[std::size_t(reads_[2 + d])], start_types_[d]), 0, shape_[d] - window_[d]);
      offset += s * stride;
      stride *= shape_[d];
    }
    if (dst != operand && bytes_) std::memmove(dst, operand, bytes_);
    const std::int64_t count = numel(window_);
    if (count == 0) return;
    // Rows of the window's last dim are contiguous in both.
    const std::int64_t row = rank ? window_[rank - 1] : 1, rows = count / row;
    std::vector<std::int64_t> idx(rank ? rank - 1 : 0, 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t at = offset;
      for (std::size_t d = 0; d + 1 < rank; ++d) at += idx[d] * strides[d];
      std::memmove(dst + std::size_t(at) * elem_, src + std::size_t(r * row) * elem_, std::size_t(row) * elem_);
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < window_[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::string describe() const override { return text_; }
  std::int64_t work() const override { return numel(window_) + 1; }
  // Its operand (a donated parameter, say): copied only when the blocks differ.
  bool may_write_over(std::size_t read, int) const override { return read == 0; }

 private:
  std::vector<int> reads_;
  int out_;
  Shape shape_, window_;
  std::size_t elem_, bytes_ = 0;
  std::vector<DType> start_types_;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> make_update_thunk(const Node& n, std::vector<int> reads, int out) {
  return std::make_unique<UpdateThunk>(n, std::move(reads), out);
}

}  // namespace tessel::codegen
