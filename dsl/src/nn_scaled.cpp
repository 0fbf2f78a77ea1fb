// jax.nn.scaled_dot_general and get_scaled_dot_general_config: a
// dot_general whose operands are block-quantized to the MX formats (mxfp8:
// float8_e4m3fn values with a float8_e8m0fnu scale per 32 elements along
// the contraction; nvfp4: float4_e2m1fn values, a float8_e4m3fn scale per
// 16, and a float32 global scale), multiplied by scaled_matmul, with JAX's
// custom gradient: the incoming cotangent and the other operand quantized
// too (config 2 and the operand's), unless config 2 is nvfp4, which takes
// the plain product and a straight-through mask. As
// jax/_src/cudnn/scaled_matmul_stablehlo.py computes it off cuDNN.
//
// Differences from JAX on CPU, both deliberate: XLA:CPU flushes subnormals,
// so an all-zero mxfp8 block (scale 2^-127, a float32 subnormal) gives NaN
// there and 0 here; and JAX's gradients come back in
// preferred_element_type, tessel's in each operand's dtype.
#include <tessel/nn.hpp>

#include <algorithm>
#include <numeric>

#include <tessel/creation.hpp>
#include <tessel/custom.hpp>
#include <tessel/dtype_info.hpp>
#include <tessel/numpy.hpp>
#include <tessel/ops.hpp>

#include "tessel/core/errors.hpp"

namespace tessel::nn {

using detail::cat;
using Dims = std::vector<std::int64_t>;

namespace {

bool has(const Dims& v, std::int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); }

Dims sorted(Dims v) {
  std::sort(v.begin(), v.end());
  return v;
}
Dims argsort(const Dims& v) {
  Dims idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) { return v[size_t(a)] < v[size_t(b)]; });
  return idx;
}

// The axes of an ndim-array in neither list, ascending.
Dims free_axes(int ndim, const Dims& contract, const Dims& batch) {
  Dims out;
  for (int d = 0; d < ndim; ++d)
    if (!has(contract, d) && !has(batch, d)) out.push_back(d);
  return out;
}

std::int64_t prod(const Shape& s, const Dims& axes) {
  std::int64_t p = 1;
  for (auto a : axes) p *= s[size_t(a)];
  return p;
}

// JAX's shape_normalization: x transposed to (batch, free, contract) axes,
// each group ascending (the order the dimension numbers list them in is not
// kept), and reshaped to [B, R, K].
Array normalize(const Array& x, const Dims& contract, const Dims& batch, const char* what) {
  const Dims b = sorted(batch), c = sorted(contract), f = free_axes(x.ndim(), contract, batch);
  if (f.empty() || c.empty())
    throw TypeError(cat("scaled_dot_general: the ", what, " of shape ", shape_str(x.shape()),
                        " needs a free (non-batch, non-contracting) dimension and a contracting one (JAX's shape "
                        "normalization reshapes it to [batch, free, contracting])"));
  std::vector<int> perm;
  for (const Dims* g : {&b, &f, &c})
    for (auto d : *g) perm.push_back(int(d));
  return reshape(transpose(x, perm), {prod(x.shape(), b), prod(x.shape(), f), prod(x.shape(), c)});
}

// The largest |x| of each block (the last axis), kept.
Array max_abs_block(const Array& xb) { return max(abs(xb), {-1}, true); }

struct Quantized {
  Array values;  // [B, R, K] in the config's data_type
  Array scales;  // [B, R, K / block_size] in its scale_type
};

// JAX's cast_to_e8m0_with_rounding_up: the float32 bits' exponent, plus one
// when any mantissa bit is set (not for 0xFE, nor for subnormals up to
// 2^-127), wrapping into a byte (a NaN gives 0x00).
Array e8m0_rounding_up(const Array& scale) {
  auto u32 = [](double v) { return full({}, v, DType::uint32); };
  const Array bits = lax::bitcast_convert_type(scale.astype(DType::float32), DType::uint32);
  const Array e = lax::shift_right_logical(bits, u32(23));
  const Array m = bitwise_and(bits, u32(0x7FFFFF));
  const Array up = (m > u32(0)) & (e != u32(0xFE)) & logical_not((e == u32(0)) & (m <= u32(0x400000)));
  return bitwise_and(e + up.astype(DType::uint32), u32(0xFF)).astype(DType::uint8);
}

// JAX's quantize along the last axis, block by block.
Quantized quantize(const Array& x3, const BlockScaleConfig& c) {
  const Shape& s = x3.shape();
  const std::int64_t K = s[2], bs = c.block_size;
  if (bs <= 0 || K < bs || K % bs != 0)
    throw ValueError(cat("scaled_dot_general: the quantized dimension (", K, " elements, the product of the ",
                         "contracting dimensions) must be a positive multiple of the block size ", bs, " (", c.mode,
                         ")"));
  const double max = finfo(c.data_type).max;
  Array xb = reshape(x3, {s[0], s[1], K / bs, bs});
  Array scaled, scales;
  if (c.mode == "mxfp8") {
    if (c.global_scale || c.scale_type != DType::float8_e8m0fnu)
      throw ValueError("scaled_dot_general: an mxfp8 config takes scale_type float8_e8m0fnu and no global_scale");
    const Array amax = max_abs_block(xb);
    const Array bytes = e8m0_rounding_up(amax / max);
    Array f = lax::bitcast_convert_type(lax::shift_left(bytes.astype(DType::uint32), full({}, 23, DType::uint32)), DType::float32);
    f = where(f == 0.0, x3.dtype() == DType::float16 ? 0x1p-15 : 0x1p-127, f);
    scaled = xb / f.astype(x3.dtype());
    scales = lax::bitcast_convert_type(bytes, DType::float8_e8m0fnu);
  } else if (c.mode == "nvfp4") {
    if (c.scale_type != DType::float8_e4m3fn || !c.global_scale || c.global_scale->dtype() != DType::float32)
      throw ValueError("scaled_dot_general: an nvfp4 config takes scale_type float8_e4m3fn and a float32 global_scale");
    xb = xb / *c.global_scale;
    const Array s_q = clip(max_abs_block(xb) / max, 0.0, finfo(DType::float8_e4m3fn).max).astype(DType::float8_e4m3fn);
    scaled = xb / s_q.astype(DType::float32);
    scales = s_q;
  } else {
    throw ValueError(cat("Unrecognized mode: ", c.mode, "."));
  }
  return {reshape(clip(scaled, -max, max).astype(c.data_type), s), reshape(scales, {s[0], s[1], K / bs})};
}

}  // namespace

BlockScaleConfig get_scaled_dot_general_config(const std::string& mode, std::optional<Array> global_scale) {
  if (mode == "nvfp4")
    return {mode, 16, DType::float4_e2m1fn, DType::float8_e4m3fn,
            global_scale ? global_scale : std::optional<Array>(ones({1}, DType::float32)), false};
  if (mode == "mxfp8") return {mode, 32, DType::float8_e4m3fn, DType::float8_e8m0fnu, std::nullopt, false};
  throw ValueError(cat("Unsupported mode: ", mode));
}

Array scaled_dot_general(const Array& lhs_in, const Array& rhs_in, const lax::DotDimensionNumbers& dn_in,
                         DType preferred_element_type, std::optional<std::vector<BlockScaleConfig>> configs) {
  const DType pet = preferred_element_type;
  if (!configs) return lax::dot_general(lhs_in, rhs_in, dn_in, DotOptions{.preferred_element_type = pet});
  if (pet != DType::float32 && pet != DType::bfloat16 && pet != DType::float16)
    throw TypeError(cat("Only support preferred_element_type in (f32, bf16, f16), but got ", dtype_name(pet)));
  if (configs->size() != 3)
    throw ValueError(cat("scaled_dot_general: configs holds one BlockScaleConfig each for lhs, rhs and the ",
                         "gradient (3), got ", configs->size()));
  const std::vector<BlockScaleConfig> cfg = *configs;
  // JAX's _ensure_batch_dim: an operand without batch dims gets a trailing one of size 1.
  Array lhs = lhs_in, rhs = rhs_in;
  lax::DotDimensionNumbers dn = dn_in;
  bool added = false;
  if (dn.lhs_batch.empty()) {
    dn.lhs_batch = {std::int64_t(lhs.ndim())};
    lhs = expand_dims(lhs, {lhs.ndim()});
    added = true;
  }
  if (dn.rhs_batch.empty()) {
    dn.rhs_batch = {std::int64_t(rhs.ndim())};
    rhs = expand_dims(rhs, {rhs.ndim()});
    added = true;
  }
  const Dims lc = dn.lhs_contracting, rc = dn.rhs_contracting, lb = dn.lhs_batch, rb = dn.rhs_batch;
  const Dims x_kept = free_axes(lhs.ndim(), lc, lb), y_kept = free_axes(rhs.ndim(), rc, rb);
  auto sizes = [](const Shape& s, const Dims& axes) {
    Shape out;
    for (auto a : axes) out.push_back(s[size_t(a)]);
    return out;
  };
  auto forward = [=](const Array& l, const Array& r) {
    const Array a = normalize(l, lc, lb, "lhs"), b = normalize(r, rc, rb, "rhs");
    const Quantized qa = quantize(a, cfg[0]), qb = quantize(b, cfg[1]);
    const bool nv = cfg[0].mode == "nvfp4";
    Array out = scaled_matmul(qa.values, qb.values, qa.scales, qb.scales, nv ? DType::float32 : pet);
    if (nv) {
      if (!cfg[1].global_scale)
        throw TypeError("scaled_dot_general: an nvfp4 lhs config needs the rhs config's global_scale too");
      out = (out * (*cfg[0].global_scale * *cfg[1].global_scale)).astype(pet);
    }
    Shape shape = sizes(l.shape(), sorted(lb));
    for (auto d : sizes(l.shape(), x_kept)) shape.push_back(d);
    for (auto d : sizes(r.shape(), y_kept)) shape.push_back(d);
    return reshape(out, shape);
  };
  // The cotangent of one operand: g against the other operand, both
  // quantized along the other operand's free dims (JAX's transpose_lhs/rhs).
  auto transpose_grad = [=](const Array& g, const Array& other, const Dims& other_kept, const Dims& other_batch,
                            const Dims& g_other_axes, const Dims& own_batch, const Dims& own_kept,
                            const Dims& own_contract, const Dims& other_contract, const Shape& own_shape,
                            const BlockScaleConfig& cg, const BlockScaleConfig& co) {
    const std::int64_t nb = std::int64_t(own_batch.size());
    Dims g_batch(static_cast<std::size_t>(nb));
    std::iota(g_batch.begin(), g_batch.end(), 0);
    const Array y3 = normalize(other, other_kept, other_batch, "operand");  // [B, K, N]
    const Array g3 = normalize(g, g_other_axes, g_batch, "cotangent");     // [B, M, N]
    Array r;
    if (cg.mode != "nvfp4") {
      const Quantized qg = quantize(g3, cg), qy = quantize(y3, co);
      r = scaled_matmul(qg.values, qy.values, qg.scales, qy.scales, pet);  // [B, M, K]
    } else {
      r = lax::dot_general(g3, y3, {{2}, {2}, {0}, {0}}, DotOptions{.preferred_element_type = pet});
    }
    Shape shape(g.shape().begin(), g.shape().begin() + nb);
    for (auto d : sizes(own_shape, own_kept)) shape.push_back(d);
    const Dims oc_sorted = sorted(other_contract);
    for (auto d : oc_sorted) shape.push_back(other.shape()[size_t(d)]);
    Dims src = own_batch;
    src.insert(src.end(), own_kept.begin(), own_kept.end());
    for (auto i : argsort(other_contract)) src.push_back(own_contract[size_t(i)]);
    std::vector<int> perm;
    for (auto i : argsort(src)) perm.push_back(int(i));
    return transpose(reshape(r, shape), perm);
  };
  auto fwd = [=](const Array& l, const Array& r) { return std::pair(forward(l, r), std::pair(l, r)); };
  auto bwd = [=](const std::pair<Array, Array>& res, const Array& g) {
    const auto& [l, r] = res;
    const std::int64_t nb = std::int64_t(lb.size()), nx = std::int64_t(x_kept.size()), ny = std::int64_t(y_kept.size());
    Dims g_rhs_free, g_lhs_free;
    for (std::int64_t k = 0; k < ny; ++k) g_rhs_free.push_back(nb + nx + k);
    for (std::int64_t k = 0; k < nx; ++k) g_lhs_free.push_back(nb + k);
    Array gl = transpose_grad(g, r, y_kept, rb, g_rhs_free, lb, x_kept, lc, rc, l.shape(), cfg[2], cfg[1]);
    Array gr = transpose_grad(g, l, x_kept, lb, g_lhs_free, rb, y_kept, rc, lc, r.shape(), cfg[2], cfg[0]);
    if (cfg[2].mode == "nvfp4") {  // straight through where the operand fits the formats' range
      const double range = finfo(cfg[0].data_type).max * finfo(cfg[0].scale_type).max;
      if (cfg[0].global_scale) gl = where(abs(l) <= *cfg[0].global_scale * range, gl, 0.0);
      if (cfg[1].global_scale) gr = where(abs(r) <= *cfg[1].global_scale * range, gr, 0.0);
    }
    return std::tuple(gl, gr);
  };
  Array out = custom_vjp([=](const Array& l, const Array& r) { return forward(l, r); }, fwd, bwd)(lhs, rhs);
  return added ? squeeze(out, {0}) : out;
}

}  // namespace tessel::nn
