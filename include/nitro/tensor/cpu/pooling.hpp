// nitro/tensor/cpu/pooling.hpp — the CPU's max and average pooling, forward and backward: the
// kernels behind device_ops::pool2d (tensor/pooling.hpp says what a window computes).
//
//   cpu::pool2d<float>(nitro::pool_kind::max, window, x, y, arg);
//   cpu::pool2d_backward<float>(nitro::pool_kind::max, window, gy, arg, gx);     // += into gx
//
// Windows of 2 x 2 and 3 x 3 (any stride up to the side) run loops whose extents the compiler knows:
// the maximum by comparisons it turns into max instructions and the first tap equal to it from a
// bit mask (random data would mispredict a branch per tap); other windows run the same arithmetic
// with run-time extents. Planes go in fixed chunks to the thread pool's workers; each plane is
// one worker's, so the bits do not depend on the thread count.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"
#include "nitro/tensor/pooling.hpp"

#include <algorithm>  // min
#include <bit>        // countr_zero
#include <cstdint>    // int64_t, uint32_t, uint64_t

namespace nitro::cpu {

namespace detail {

// K, S > 0: the window's side and step known at compile time; 0: read from p.
template <pool_kind Kind, std::int64_t K, std::int64_t S, class T>
void pool_plane(pool_window const& p, T const* x, T* y, std::uint32_t* arg) {
  const std::int64_t k = K ? K : p.k, s = S ? S : p.stride, w = p.w;
  for (std::int64_t oy = 0; oy < p.oh; ++oy) {
    T const* r = x + w * oy * s;  // the windows' top row
    T* yr = y + p.ow * oy;
    for (std::int64_t ox = 0; ox < p.ow; ++ox) {
      T const* q = r + ox * s;
      if constexpr (Kind == pool_kind::average) {
        yr[ox] = pooling::mean_window(q, k, w);
      } else if constexpr (K == 0) {
        yr[ox] = pooling::max_window(q, k, w, arg ? arg + ox + p.ow * oy : nullptr);
      } else {
        T v[K * K];
        for (std::int64_t ky = 0; ky < K; ++ky)
          for (std::int64_t kx = 0; kx < K; ++kx) v[kx + K * ky] = q[kx + w * ky];
        T m = v[0];
        for (std::int64_t i = 1; i < K * K; ++i) m = v[i] > m ? v[i] : m;
        yr[ox] = m;
        if (arg) {
          std::uint64_t hit = std::uint64_t(1) << (K * K - 1);  // (NaN windows: the last tap)
          for (std::int64_t i = 0; i < K * K; ++i) hit |= std::uint64_t(v[i] == m) << i;
          arg[ox + p.ow * oy] = static_cast<std::uint32_t>(std::countr_zero(hit));
        }
      }
    }
  }
}
template <pool_kind Kind, std::int64_t K, std::int64_t S, class T>
void pool_plane_backward(pool_window const& p, T const* gy, std::uint32_t const* arg, T* gx) {
  const std::int64_t k = K ? K : p.k, s = S ? S : p.stride, w = p.w;
  for (std::int64_t oy = 0; oy < p.oh; ++oy)
    for (std::int64_t ox = 0; ox < p.ow; ++ox) {
      const std::int64_t o = ox + p.ow * oy, at = ox * s + w * oy * s;
      if constexpr (Kind == pool_kind::max) {
        gx[at + arg[o] % k + w * (arg[o] / k)] += gy[o];
      } else {
        const T v = gy[o] * (T(1) / T(k * k));
        for (std::int64_t ky = 0; ky < k; ++ky)
          for (std::int64_t kx = 0; kx < k; ++kx) gx[at + kx + w * ky] += v;
      }
    }
}

// f(plane range) over the planes, in fixed chunks on the pool's workers once the work is worth a
// region (cpu/thread_pool.hpp).
template <class F>
void over_planes(pool_window const& p, F&& f) {
  const fixed_chunks ch(p.planes);
  run_chunks(ch, double(p.planes) * double(p.out_plane()) * double(p.k * p.k), [&](std::int64_t c) { f(ch.begin(c), ch.end(c)); });
}

// g.template operator()<K, S>() with the window's side and step as constants where they are common.
template <class G>
void with_window(pool_window const& p, G&& g) {
  if (p.k == 2 && p.stride == 2) return g.template operator()<2, 2>();
  if (p.k == 2 && p.stride == 1) return g.template operator()<2, 1>();
  if (p.k == 3 && p.stride == 3) return g.template operator()<3, 3>();
  if (p.k == 3 && p.stride == 2) return g.template operator()<3, 2>();
  if (p.k == 3 && p.stride == 1) return g.template operator()<3, 1>();
  g.template operator()<0, 0>();
}

}  // namespace detail

template <class T>
void pool2d(pool_kind kind, pool_window const& p, T const* x, T* y, std::uint32_t* arg) {
  const std::int64_t in = p.in_plane(), out = p.out_plane();
  detail::with_window(p, [&]<std::int64_t K, std::int64_t S>() {
    detail::over_planes(p, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        if (kind == pool_kind::max) detail::pool_plane<pool_kind::max, K, S>(p, x + i * in, y + i * out, arg ? arg + i * out : nullptr);
        else detail::pool_plane<pool_kind::average, K, S>(p, x + i * in, y + i * out, nullptr);
      }
    });
  });
}
template <class T>
void pool2d_backward(pool_kind kind, pool_window const& p, T const* gy, std::uint32_t const* arg, T* gx) {
  const std::int64_t in = p.in_plane(), out = p.out_plane();
  detail::with_window(p, [&]<std::int64_t K, std::int64_t S>() {
    detail::over_planes(p, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        if (kind == pool_kind::max) detail::pool_plane_backward<pool_kind::max, K, S>(p, gy + i * out, arg + i * out, gx + i * in);
        else detail::pool_plane_backward<pool_kind::average, K, S>(p, gy + i * out, nullptr, gx + i * in);
      }
    });
  });
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp): every window the dispatch knows, both types.
extern template void pool2d<float>(pool_kind, pool_window const&, float const*, float*, std::uint32_t*);
extern template void pool2d<double>(pool_kind, pool_window const&, double const*, double*, std::uint32_t*);
extern template void pool2d_backward<float>(pool_kind, pool_window const&, float const*, std::uint32_t const*, float*);
extern template void pool2d_backward<double>(pool_kind, pool_window const&, double const*, std::uint32_t const*, double*);
#endif

}  // namespace nitro::cpu
