// nitro/tensor/cpu/norm.hpp — the CPU's normalisations: layer norm over each column's features,
// batch norm over each channel's values in the batch, forward and backward.
//
//   cpu::layer_norm<float>(F, cols, eps, x, w, b, y, stats);          // stats: mean, rstd per column
//   cpu::layer_norm_backward<float>(F, cols, x, w, stats, gy, gx, gw, gb);   // += into each
//   cpu::batch_norm<float>(training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
//
// Column and channel loops over Eigen's vectorised sums, in one fixed order (the parameters'
// gradients add column after column), so the bits do not depend on the thread count. These are
// the reference the GPU's kernels (kernels/norm.cuh) are tested against.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/elementwise.hpp"  // detail::flat

#include <cmath>    // sqrt
#include <cstdint>  // int64_t

namespace nitro::cpu {

template <class T>
void layer_norm(std::int64_t F, std::int64_t cols, double eps, T const* x, T const* w, T const* b, T* y, T* stats) {
  const T e = static_cast<T>(eps);
  for (std::int64_t n = 0; n < cols; ++n) {
    auto X = detail::flat(x + n * F, F);
    const T mu = X.mean();
    const T var = (X - mu).square().mean();
    const T rstd = T(1) / std::sqrt(var + e);
    detail::flat(y + n * F, F) = (X - mu) * rstd * detail::flat(w, F) + detail::flat(b, F);
    if (stats) { stats[2 * n] = mu; stats[2 * n + 1] = rstd; }
  }
}
template <class T>
void layer_norm_backward(std::int64_t F, std::int64_t cols, T const* x, T const* w, T const* stats, T const* gy, T* gx, T* gw, T* gb) {
  for (std::int64_t n = 0; n < cols; ++n) {
    const T mu = stats[2 * n], rstd = stats[2 * n + 1];
    auto G = detail::flat(gy + n * F, F);
    auto Xhat = (detail::flat(x + n * F, F) - mu) * rstd;
    if (gw) detail::flat(gw, F) += G * Xhat;
    if (gb) detail::flat(gb, F) += G;
    if (gx) {
      auto D = G * detail::flat(w, F);  // d loss / d xhat
      const T mean_d = D.mean(), mean_dx = (D * Xhat).mean();
      detail::flat(gx + n * F, F) += (D - mean_d - Xhat * mean_dx) * rstd;
    }
  }
}

template <class T>
void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, T const* x, T const* w,
                T const* b, T const* running_mean, T const* running_var, T* stats, T* new_mean, T* new_var, T* y) {
  const T e = static_cast<T>(eps);
  const std::int64_t M = inner * B;  // values per channel
  auto channel = [&](std::int64_t c, std::int64_t bb) { return x + inner * (c + C * bb); };
  if (training) {
    const T mom = static_cast<T>(momentum);
    for (std::int64_t c = 0; c < C; ++c) {
      T sum = 0;
      for (std::int64_t bb = 0; bb < B; ++bb) sum += detail::flat(channel(c, bb), inner).sum();
      const T mu = sum / T(M);
      T sq = 0;
      for (std::int64_t bb = 0; bb < B; ++bb) sq += (detail::flat(channel(c, bb), inner) - mu).square().sum();
      const T var = sq / T(M);
      stats[2 * c] = mu;
      stats[2 * c + 1] = T(1) / std::sqrt(var + e);
      if (new_mean) new_mean[c] = (T(1) - mom) * running_mean[c] + mom * mu;
      if (new_var) new_var[c] = (T(1) - mom) * running_var[c] + mom * var * T(M) / T(M - 1);
    }
  } else {
    for (std::int64_t c = 0; c < C; ++c) {
      stats[2 * c] = running_mean[c];
      stats[2 * c + 1] = T(1) / std::sqrt(running_var[c] + e);
    }
  }
  for (std::int64_t bb = 0; bb < B; ++bb)
    for (std::int64_t c = 0; c < C; ++c) {
      const T scale = stats[2 * c + 1] * w[c], shift = b[c] - stats[2 * c] * scale;
      detail::flat(y + inner * (c + C * bb), inner) = detail::flat(channel(c, bb), inner) * scale + shift;
    }
}
template <class T>
void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, T const* x, T const* w, T const* stats,
                         T const* gy, T* gx, T* gw, T* gb) {
  const std::int64_t M = inner * B;
  for (std::int64_t c = 0; c < C; ++c) {
    const T mu = stats[2 * c], rstd = stats[2 * c + 1];
    T sum_g = 0, sum_gx = 0;  // sum of g, and of g xhat, over the channel
    for (std::int64_t bb = 0; bb < B; ++bb) {
      const std::int64_t o = inner * (c + C * bb);
      auto G = detail::flat(gy + o, inner);
      sum_g += G.sum();
      sum_gx += (G * ((detail::flat(x + o, inner) - mu) * rstd)).sum();
    }
    if (gw) gw[c] += sum_gx;
    if (gb) gb[c] += sum_g;
    if (!gx) continue;
    const T k = w[c] * rstd;
    if (training) {  // the batch statistics depend on x too
      const T mean_g = sum_g / T(M), mean_gx = sum_gx / T(M);
      for (std::int64_t bb = 0; bb < B; ++bb) {
        const std::int64_t o = inner * (c + C * bb);
        detail::flat(gx + o, inner) += (detail::flat(gy + o, inner) - mean_g - (detail::flat(x + o, inner) - mu) * rstd * mean_gx) * k;
      }
    } else {
      for (std::int64_t bb = 0; bb < B; ++bb) {
        const std::int64_t o = inner * (c + C * bb);
        detail::flat(gx + o, inner) += detail::flat(gy + o, inner) * k;
      }
    }
  }
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp): the kernels table's virtuals reach both types.
#define NITRO_DETAIL_NORM(T)                                                                                                   \
  extern template void layer_norm<T>(std::int64_t, std::int64_t, double, T const*, T const*, T const*, T*, T*);                \
  extern template void layer_norm_backward<T>(std::int64_t, std::int64_t, T const*, T const*, T const*, T const*, T*, T*, T*); \
  extern template void batch_norm<T>(bool, std::int64_t, std::int64_t, std::int64_t, double, double, T const*, T const*, T const*, \
                                     T const*, T const*, T*, T*, T*, T*);                                                      \
  extern template void batch_norm_backward<T>(bool, std::int64_t, std::int64_t, std::int64_t, T const*, T const*, T const*,   \
                                              T const*, T*, T*, T*);
NITRO_DETAIL_NORM(float)
NITRO_DETAIL_NORM(double)
#undef NITRO_DETAIL_NORM
#endif

}  // namespace nitro::cpu
