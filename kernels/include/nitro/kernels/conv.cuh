// nitro/kernels/conv.cuh — the element-wise pieces of a 2-D convolution on the GPU: the batch's
// im2col and col2im, the bias and activation over a WHCN output, the activation's derivative, and
// the bias's gradient. cuda::ops (kernels/ops.cuh) runs device_ops::conv2d from these and the
// table's products, one per sample.
//
//   nitro::cuda::im2col<float>(stream, window, x, col);        // every sample's [P, K*K*InC] matrix
//   nitro::cuda::col2im<float>(stream, window, dcol, dx);      // dx += the taps of each pixel
//   nitro::cuda::channel_bias_activation<float>(stream, window, act, bias, z, y);
//
// col2im gives each input value one thread, which adds its taps in the CPU's order (kernel row by
// row); the bias's gradient is one block per channel, summed in a fixed order: no atomics, the
// same bits on every run. Nothing waits for the device.
#pragma once

#include "nitro/kernels/elementwise.cuh"  // grid_for
#include "nitro/kernels/epilogue.cuh"     // activate, activation_derivative
#include "nitro/kernels/reduction.cuh"    // block_combine, blocks_of, reduce_threads
#include "nitro/tensor/convolution.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/epilogue.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {

template <class T>
__global__ void im2col_kernel(conv_window p, T const* x, T* col) {
  const std::int64_t P = p.out_plane(), kkc = p.rows(), per = P * kkc, total = p.batch * per;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t b = e / per, r = e % per, row = r / P, pos = r % P;
    const std::int64_t ox = pos % p.ow, oy = pos / p.ow, kx = row % p.k, ky = (row / p.k) % p.k, c = row / (p.k * p.k);
    const std::int64_t ix = ox * p.stride - p.pad + kx, iy = oy * p.stride - p.pad + ky;
    col[e] = ix >= 0 && ix < p.w && iy >= 0 && iy < p.h ? x[b * p.in_plane() * p.in_c + ix + p.w * (iy + p.h * c)] : T(0);
  }
}

template <class T>
__global__ void col2im_kernel(conv_window p, T const* dcol, T* dx) {
  const std::int64_t in_image = p.in_plane() * p.in_c, total = p.batch * in_image, P = p.out_plane();
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t b = e / in_image, r = e % in_image, ix = r % p.w, iy = (r / p.w) % p.h, c = r / p.in_plane();
    T const* src = dcol + b * P * p.rows();
    T acc = dx[e];
    for (std::int64_t ky = 0; ky < p.k; ++ky) {
      const std::int64_t ny = iy + p.pad - ky;  // oy stride
      if (ny < 0 || ny % p.stride != 0 || ny / p.stride >= p.oh) continue;
      for (std::int64_t kx = 0; kx < p.k; ++kx) {
        const std::int64_t nx = ix + p.pad - kx;
        if (nx < 0 || nx % p.stride != 0 || nx / p.stride >= p.ow) continue;
        acc += src[P * (kx + p.k * (ky + p.k * c)) + nx / p.stride + p.ow * (ny / p.stride)];
      }
    }
    dx[e] = acc;
  }
}

// y = act(pre + bias[channel]) over [P, out_c, batch]; z, when not null, keeps pre + bias.
template <class T>
__global__ void channel_bias_activation_kernel(conv_window p, epilogue_act act, T const* bias, T const* pre, T* z, T* y) {
  const std::int64_t P = p.out_plane(), total = p.batch * P * p.out_c;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total; e += std::int64_t(gridDim.x) * blockDim.x) {
    const T v = pre[e] + (bias ? bias[(e / P) % p.out_c] : T(0));
    if (z) z[e] = v;
    y[e] = activate(act, v);
  }
}

template <class T>
__global__ void activation_grad_kernel(std::int64_t n, epilogue_act act, T const* gy, T const* yz, T* g) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n; e += std::int64_t(gridDim.x) * blockDim.x)
    g[e] = gy[e] * activation_derivative(act, yz[e]);
}

// Block c (and c + gridDim.x, ...): gb[c] += the sum of g over channel c's P values of every sample.
template <class T>
__global__ void channel_sum_kernel(conv_window p, T const* g, T* gb) {
  __shared__ T shared[reduce_threads];
  const std::int64_t P = p.out_plane(), M = P * p.batch;
  for (std::int64_t c = blockIdx.x; c < p.out_c; c += gridDim.x) {
    T s = 0;
    for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads) s += g[P * (c + p.out_c * (m / P)) + m % P];
    s = block_combine(s, false, shared);
    if (threadIdx.x == 0) gb[c] += s;
  }
}

}  // namespace detail

// The scratch values cuda::ops' convolution needs: every sample's im2col matrix, and backward the
// activation's gradient of the whole output too.
inline std::int64_t conv2d_scratch(conv_window const& p, bool backward) noexcept {
  const std::int64_t col = p.direct() ? 0 : p.batch * p.out_plane() * p.rows();
  return backward ? col + p.batch * p.out_plane() * p.out_c : col;
}

template <class T>
void im2col(cudaStream_t s, conv_window const& p, T const* x, T* col) {
  const std::int64_t total = p.batch * p.out_plane() * p.rows();
  if (total <= 0) return;
  detail::im2col_kernel<T><<<detail::grid_for(total), 256, 0, s>>>(p, x, col);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void col2im(cudaStream_t s, conv_window const& p, T const* dcol, T* dx) {
  const std::int64_t total = p.batch * p.in_plane() * p.in_c;
  if (total <= 0) return;
  detail::col2im_kernel<T><<<detail::grid_for(total), 256, 0, s>>>(p, dcol, dx);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void channel_bias_activation(cudaStream_t s, conv_window const& p, epilogue_act act, T const* bias, T const* pre, T* z, T* y) {
  const std::int64_t total = p.batch * p.out_plane() * p.out_c;
  if (total <= 0) return;
  detail::channel_bias_activation_kernel<T><<<detail::grid_for(total), 256, 0, s>>>(p, act, bias, pre, z, y);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void activation_grad(cudaStream_t s, std::int64_t n, epilogue_act act, T const* gy, T const* yz, T* g) {
  if (n <= 0) return;
  detail::activation_grad_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(n, act, gy, yz, g);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void channel_sum(cudaStream_t s, conv_window const& p, T const* g, T* gb) {
  if (p.out_c <= 0) return;
  detail::channel_sum_kernel<T><<<detail::blocks_of(p.out_c, 1, 65535), detail::reduce_threads, 0, s>>>(p, g, gb);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
