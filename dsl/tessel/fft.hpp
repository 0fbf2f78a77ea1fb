// ts::fft: jnp.fft. Transforms run by FFTW on each device's own thread.
//
// Sharded arrays: axes that are not split are transformed where the data
// lies, with no communication. A transformed axis that is split has its
// split moved to another dim by one all-to-all (a pencil decomposition), is
// transformed locally, and the result moves back: it keeps the input's
// sharding and the whole array is never gathered on one device. When every
// dim of the array is a transformed axis that is split (a 1-D array split
// over devices; there is no other dim to move the split to), that axis is
// gathered. The last axis of rfft/irfft (whose length changes) is never
// split: an input split along it is gathered along it first.
//
// norm: "backward" (the default: no scaling forward, 1/n inverse), "ortho"
// (1/sqrt(n) both ways) or "forward" (1/n forward, none inverse).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <tessel/array.hpp>

namespace tessel::fft {

using Sizes = std::optional<std::vector<std::int64_t>>;
using Axes = std::optional<std::vector<int>>;

// n / s: the input cropped or zero-padded to these lengths along the axes first.
Array fft(const Array& a, std::optional<std::int64_t> n = std::nullopt, int axis = -1, const std::string& norm = "backward");
Array ifft(const Array& a, std::optional<std::int64_t> n = std::nullopt, int axis = -1, const std::string& norm = "backward");
Array fft2(const Array& a, const Sizes& s = std::nullopt, const std::vector<int>& axes = {-2, -1},
           const std::string& norm = "backward");
Array ifft2(const Array& a, const Sizes& s = std::nullopt, const std::vector<int>& axes = {-2, -1},
            const std::string& norm = "backward");
// axes default: all (the last len(s) when s is given).
Array fftn(const Array& a, const Sizes& s = std::nullopt, const Axes& axes = std::nullopt, const std::string& norm = "backward");
Array ifftn(const Array& a, const Sizes& s = std::nullopt, const Axes& axes = std::nullopt, const std::string& norm = "backward");
// Real input: n/2 + 1 outputs along the (last) axis.
Array rfft(const Array& a, std::optional<std::int64_t> n = std::nullopt, int axis = -1, const std::string& norm = "backward");
// Real output of length n (default 2 (m - 1) for m inputs along the axis).
Array irfft(const Array& a, std::optional<std::int64_t> n = std::nullopt, int axis = -1, const std::string& norm = "backward");
Array rfft2(const Array& a, const Sizes& s = std::nullopt, const std::vector<int>& axes = {-2, -1},
            const std::string& norm = "backward");
Array irfft2(const Array& a, const Sizes& s = std::nullopt, const std::vector<int>& axes = {-2, -1},
             const std::string& norm = "backward");
Array rfftn(const Array& a, const Sizes& s = std::nullopt, const Axes& axes = std::nullopt, const std::string& norm = "backward");
Array irfftn(const Array& a, const Sizes& s = std::nullopt, const Axes& axes = std::nullopt, const std::string& norm = "backward");

// Sample frequencies: [0, 1, ..., -2, -1] / (d n) and [0, ..., n/2] / (d n); float32 by default.
Array fftfreq(std::int64_t n, double d = 1.0, DType dtype = DType::float32);
Array rfftfreq(std::int64_t n, double d = 1.0, DType dtype = DType::float32);
// The zero frequency moved to the centre (rolled by n/2 along each axis; all by default), and back.
Array fftshift(const Array& x, const Axes& axes = std::nullopt);
Array ifftshift(const Array& x, const Axes& axes = std::nullopt);

}  // namespace tessel::fft
