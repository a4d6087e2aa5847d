// nitro/tensor/pooling.hpp — what a pooling window is, for every backend: the kinds, the window's
// extents, and the one-window arithmetic the CPU's loops and the GPU's kernels both run.
//
//   nitro::pool_window p{.k = 2, .stride = 2, .w = 28, .h = 28, .ow = 14, .oh = 14, .planes = C * B};
//   ops.pool2d(nitro::pool_kind::max, p, x, y, arg);          // device_ops (tensor/device_ops.hpp)
//
// Planes are w x h values, w fastest (WHCN images: a plane per channel and sample); windows k x k,
// moved by `stride`, no padding. Max keeps, per output, the place of the window's first largest
// value (ky k + kx; a window of NaNs: the last place), which its backward routes the gradient to;
// average spreads each gradient evenly over the window.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cstdint>  // int64_t, uint32_t

namespace nitro {

enum class pool_kind { max, average };

struct pool_window {
  std::int64_t k = 1, stride = 1;  // the window's side, its step
  std::int64_t w = 0, h = 0;       // an input plane
  std::int64_t ow = 0, oh = 0;     // an output plane: (w - k) / stride + 1 wide
  std::int64_t planes = 0;         // channels times samples
  NITRO_HD std::int64_t in_plane() const noexcept { return w * h; }
  NITRO_HD std::int64_t out_plane() const noexcept { return ow * oh; }
};

namespace pooling {

// The window at q (its top-left value; row ky at q + ky w): the largest value, and with `arg` its
// first place; or the mean.
template <class T>
NITRO_HD T max_window(T const* q, std::int64_t k, std::int64_t w, std::uint32_t* arg) {
  T m = q[0];
  for (std::int64_t ky = 0; ky < k; ++ky)
    for (std::int64_t kx = 0; kx < k; ++kx) m = q[kx + w * ky] > m ? q[kx + w * ky] : m;
  if (arg) {
    std::uint32_t at = static_cast<std::uint32_t>(k * k - 1);
    for (std::int64_t i = k * k - 1; i >= 0; --i) at = q[i % k + w * (i / k)] == m ? static_cast<std::uint32_t>(i) : at;
    *arg = at;
  }
  return m;
}
template <class T>
NITRO_HD T mean_window(T const* q, std::int64_t k, std::int64_t w) {
  T s = 0;
  for (std::int64_t ky = 0; ky < k; ++ky)
    for (std::int64_t kx = 0; kx < k; ++kx) s += q[kx + w * ky];
  return s * (T(1) / T(k * k));
}

}  // namespace pooling
}  // namespace nitro
