// nitro/kernels/norm.cuh — layer and batch normalisation on the GPU: the CUDA side of
// device_ops::layer_norm, batch_norm and their backward (tensor/device_ops.hpp says what each
// computes; tensor/cpu/norm.hpp is the reference they are tested against).
//
//   nitro::cuda::layer_norm<float>(stream, F, cols, eps, x, w, b, y, stats);
//   nitro::cuda::layer_norm_backward<float>(stream, F, cols, x, w, stats, gy, gx, gw, gb);
//   nitro::cuda::batch_norm<float>(stream, training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
//   nitro::cuda::batch_norm_backward<float>(stream, training, inner, C, B, x, w, stats, gy, gx, gw, gb);
//
// Layer norm: one warp per column, its sums a butterfly of shuffles (every lane ends with the same
// bits); the weight's and bias's gradients one thread column of 8 slices per feature, the slices
// combined in order. Batch norm: one block per channel, the block's fixed-order combine. No
// atomics anywhere: the same bits on every run. Nothing waits for the device.
#pragma once

#include "nitro/kernels/reduction.cuh"  // warp_sum, block_combine, blocks_of, reduce_threads
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {

constexpr int norm_warps = 8;   // columns per block of layer_norm's column kernels
constexpr int norm_slices = 8;  // column slices per feature in the parameter gradients' kernel

template <class T>
__global__ void layer_norm_columns(std::int64_t F, std::int64_t cols, T eps, T const* x, T const* w, T const* b, T* y, T* stats) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t n = blockIdx.x * std::int64_t(norm_warps) + threadIdx.x / 32; n < cols; n += std::int64_t(gridDim.x) * norm_warps) {
    T const* xs = x + n * F;
    T s = 0;
    for (std::int64_t f = lane; f < F; f += 32) s += xs[f];
    const T mu = warp_sum(s) / T(F);
    T q = 0;
    for (std::int64_t f = lane; f < F; f += 32) q += (xs[f] - mu) * (xs[f] - mu);
    // ::sqrt: nitro::sqrt (a tensor op) would hide the device overload where nitro.hpp came first
    const T rstd = T(1) / ::sqrt(warp_sum(q) / T(F) + eps);
    for (std::int64_t f = lane; f < F; f += 32) y[n * F + f] = (xs[f] - mu) * rstd * w[f] + b[f];
    if (stats && lane == 0) {
      stats[2 * n] = mu;
      stats[2 * n + 1] = rstd;
    }
  }
}

template <class T>
__global__ void layer_norm_input_grad(std::int64_t F, std::int64_t cols, T const* x, T const* w, T const* stats, T const* gy, T* gx) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t n = blockIdx.x * std::int64_t(norm_warps) + threadIdx.x / 32; n < cols; n += std::int64_t(gridDim.x) * norm_warps) {
    const T mu = stats[2 * n], rstd = stats[2 * n + 1];
    T const* xs = x + n * F;
    T const* g = gy + n * F;
    T sd = 0, sdx = 0;  // sums of d = g w and of d xhat
    for (std::int64_t f = lane; f < F; f += 32) {
      const T d = g[f] * w[f];
      sd += d;
      sdx += d * (xs[f] - mu) * rstd;
    }
    const T mean_d = warp_sum(sd) / T(F), mean_dx = warp_sum(sdx) / T(F);
    for (std::int64_t f = lane; f < F; f += 32) gx[n * F + f] += (g[f] * w[f] - mean_d - (xs[f] - mu) * rstd * mean_dx) * rstd;
  }
}

// Block (32 features x norm_slices slices): slice s sums columns s, s + slices, ... in order; slice
// 0 adds the slices' sums in order.
template <class T>
__global__ void layer_norm_param_grad(std::int64_t F, std::int64_t cols, T const* x, T const* stats, T const* gy, T* gw, T* gb) {
  __shared__ T part_w[norm_slices][32], part_b[norm_slices][32];
  const std::int64_t f = blockIdx.x * std::int64_t(32) + threadIdx.x;
  T sw = 0, sb = 0;
  if (f < F)
    for (std::int64_t n = threadIdx.y; n < cols; n += norm_slices) {
      const T g = gy[n * F + f];
      sw += g * (x[n * F + f] - stats[2 * n]) * stats[2 * n + 1];
      sb += g;
    }
  part_w[threadIdx.y][threadIdx.x] = sw;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y != 0 || f >= F) return;
  for (int s = 1; s < norm_slices; ++s) {
    sw += part_w[s][threadIdx.x];
    sb += part_b[s][threadIdx.x];
  }
  if (gw) gw[f] += sw;
  if (gb) gb[f] += sb;
}

// Block c (and c + gridDim.x, ...) normalises channel c: its values are m = i + inner bb for i <
// inner, bb < B, at x + inner (c + C bb) + i.
template <class T>
__global__ void batch_norm_channels(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, T eps, T momentum, T const* x,
                                    T const* w, T const* b, T const* rm, T const* rv, T* stats, T* nm, T* nv, T* y) {
  __shared__ T shared[reduce_threads];
  const std::int64_t M = inner * B;
  for (std::int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    auto at = [&](std::int64_t m) { return inner * (c + C * (m / inner)) + m % inner; };
    T mu, rstd;
    if (training) {
      T s = 0;
      for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads) s += x[at(m)];
      mu = block_combine(s, false, shared) / T(M);
      T q = 0;
      for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads) q += (x[at(m)] - mu) * (x[at(m)] - mu);
      const T var = block_combine(q, false, shared) / T(M);
      rstd = T(1) / ::sqrt(var + eps);
      if (threadIdx.x == 0) {
        if (nm) nm[c] = (T(1) - momentum) * rm[c] + momentum * mu;
        if (nv) nv[c] = (T(1) - momentum) * rv[c] + momentum * var * T(M) / T(M - 1);
      }
    } else {
      mu = rm[c];
      rstd = T(1) / ::sqrt(rv[c] + eps);
    }
    if (threadIdx.x == 0) {
      stats[2 * c] = mu;
      stats[2 * c + 1] = rstd;
    }
    const T scale = rstd * w[c], shift = b[c] - mu * scale;
    for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads) y[at(m)] = x[at(m)] * scale + shift;
  }
}

template <class T>
__global__ void batch_norm_channels_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, T const* x, T const* w,
                                             T const* stats, T const* gy, T* gx, T* gw, T* gb) {
  __shared__ T shared[reduce_threads];
  const std::int64_t M = inner * B;
  for (std::int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    auto at = [&](std::int64_t m) { return inner * (c + C * (m / inner)) + m % inner; };
    const T mu = stats[2 * c], rstd = stats[2 * c + 1];
    T sg = 0, sgx = 0;
    for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads) {
      sg += gy[at(m)];
      sgx += gy[at(m)] * (x[at(m)] - mu) * rstd;
    }
    const T sum_g = block_combine(sg, false, shared), sum_gx = block_combine(sgx, false, shared);
    if (threadIdx.x == 0) {
      if (gw) gw[c] += sum_gx;
      if (gb) gb[c] += sum_g;
    }
    if (!gx) continue;
    const T k = w[c] * rstd;
    const T mean_g = training ? sum_g / T(M) : T(0), mean_gx = training ? sum_gx / T(M) : T(0);
    for (std::int64_t m = threadIdx.x; m < M; m += reduce_threads)
      gx[at(m)] += (gy[at(m)] - mean_g - (x[at(m)] - mu) * rstd * mean_gx) * k;
  }
}

}  // namespace detail

template <class T>
void layer_norm(cudaStream_t s, std::int64_t F, std::int64_t cols, double eps, T const* x, T const* w, T const* b, T* y, T* stats) {
  if (F <= 0 || cols <= 0) return;
  detail::layer_norm_columns<T><<<detail::blocks_of(cols, detail::norm_warps, 65535), 32 * detail::norm_warps, 0, s>>>(
      F, cols, static_cast<T>(eps), x, w, b, y, stats);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void layer_norm_backward(cudaStream_t s, std::int64_t F, std::int64_t cols, T const* x, T const* w, T const* stats, T const* gy, T* gx, T* gw,
                         T* gb) {
  if (F <= 0 || cols <= 0) return;
  if (gx) {
    detail::layer_norm_input_grad<T><<<detail::blocks_of(cols, detail::norm_warps, 65535), 32 * detail::norm_warps, 0, s>>>(
        F, cols, x, w, stats, gy, gx);
    NITRO_CUDA_CHECK(cudaGetLastError());
  }
  if (gw || gb) {
    detail::layer_norm_param_grad<T><<<detail::blocks_of(F, 32, 1u << 30), dim3(32, detail::norm_slices), 0, s>>>(F, cols, x, stats, gy,
                                                                                                                  gw, gb);
    NITRO_CUDA_CHECK(cudaGetLastError());
  }
}

template <class T>
void batch_norm(cudaStream_t s, bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, T const* x,
                T const* w, T const* b, T const* rm, T const* rv, T* stats, T* nm, T* nv, T* y) {
  if (C <= 0) return;
  detail::batch_norm_channels<T><<<detail::blocks_of(C, 1, 65535), detail::reduce_threads, 0, s>>>(
      training, inner, C, B, static_cast<T>(eps), static_cast<T>(momentum), x, w, b, rm, rv, stats, nm, nv, y);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void batch_norm_backward(cudaStream_t s, bool training, std::int64_t inner, std::int64_t C, std::int64_t B, T const* x, T const* w,
                         T const* stats, T const* gy, T* gx, T* gw, T* gb) {
  if (C <= 0) return;
  detail::batch_norm_channels_backward<T><<<detail::blocks_of(C, 1, 65535), detail::reduce_threads, 0, s>>>(training, inner, C, B, x, w,
                                                                                                            stats, gy, gx, gw, gb);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
