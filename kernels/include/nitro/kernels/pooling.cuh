// nitro/kernels/pooling.cuh — max and average pooling on the GPU: the CUDA side of
// device_ops::pool2d and its backward (tensor/pooling.hpp holds the one-window arithmetic both
// sides run).
//
//   nitro::cuda::pool2d<float>(stream, nitro::pool_kind::max, window, x, y, arg);
//   nitro::cuda::pool2d_backward<float>(stream, nitro::pool_kind::max, window, gy, arg, gx);
//
// Forward: a thread per output. Backward: a thread per input value, which gathers the outputs
// whose windows hold it (overlapping windows when the stride is below the side) in the order the
// CPU adds them, row by row: no atomics, the same bits as the CPU's loops on every run. Nothing
// waits for the device.
#pragma once

#include "nitro/kernels/elementwise.cuh"  // grid_for
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/pooling.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t, uint32_t

namespace nitro::cuda {

namespace detail {
template <class T>
__global__ void pool_kernel(pool_kind kind, pool_window p, T const* x, T* y, std::uint32_t* arg) {
  const std::int64_t out = p.out_plane(), total = p.planes * out;
  for (std::int64_t o = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; o < total; o += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = o / out, at = o % out, ox = at % p.ow, oy = at / p.ow;
    T const* q = x + plane * p.in_plane() + ox * p.stride + p.w * oy * p.stride;
    y[o] = kind == pool_kind::max ? pooling::max_window(q, p.k, p.w, arg ? arg + o : nullptr) : pooling::mean_window(q, p.k, p.w);
  }
}
// The outputs along one axis whose windows cover input position i: [first, last].
__device__ inline void covering(std::int64_t i, std::int64_t k, std::int64_t s, std::int64_t n_out, std::int64_t& first, std::int64_t& last) {
  first = i >= k ? (i - k) / s + 1 : 0;  // the first o with o s + k > i
  last = i / s < n_out - 1 ? i / s : n_out - 1;
}
template <class T>
__global__ void pool_backward_kernel(pool_kind kind, pool_window p, T const* gy, std::uint32_t const* arg, T* gx) {
  const std::int64_t in = p.in_plane(), out = p.out_plane(), total = p.planes * in;
  const T share = T(1) / T(p.k * p.k);
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = e / in, at = e % in, ix = at % p.w, iy = at / p.w;
    std::int64_t x0, x1, y0, y1;
    covering(ix, p.k, p.stride, p.ow, x0, x1);
    covering(iy, p.k, p.stride, p.oh, y0, y1);
    T const* g = gy + plane * out;
    T acc = gx[e];  // added to in the CPU's order: the covering outputs row by row
    for (std::int64_t oy = y0; oy <= y1; ++oy)
      for (std::int64_t ox = x0; ox <= x1; ++ox) {
        const std::int64_t o = ox + p.ow * oy;
        if (kind == pool_kind::average) {
          acc += g[o] * share;
        } else if (arg[plane * out + o] == std::uint32_t((ix - ox * p.stride) + p.k * (iy - oy * p.stride))) {
          acc += g[o];
        }
      }
    gx[e] = acc;
  }
}
}  // namespace detail

template <class T>
void pool2d(cudaStream_t s, pool_kind kind, pool_window const& p, T const* x, T* y, std::uint32_t* arg) {
  const std::int64_t total = p.planes * p.out_plane();
  if (total <= 0) return;
  detail::pool_kernel<T><<<detail::grid_for(total), 256, 0, s>>>(kind, p, x, y, arg);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void pool2d_backward(cudaStream_t s, pool_kind kind, pool_window const& p, T const* gy, std::uint32_t const* arg, T* gx) {
  const std::int64_t total = p.planes * p.in_plane();
  if (total <= 0 || p.out_plane() <= 0) return;
  detail::pool_backward_kernel<T><<<detail::grid_for(total), 256, 0, s>>>(kind, p, gy, arg, gx);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
