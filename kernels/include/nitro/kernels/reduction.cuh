// nitro/kernels/reduction.cuh — reductions and softmax on the GPU: the CUDA side of
// device_ops::reduce, reduce_backward, softmax and softmax_backward.
//
//   nitro::cuda::reduce<float>(stream, nitro::reduce_op::sum, nitro::reduction_at(s, 1), x, y);
//   nitro::cuda::reduce_backward<float>(stream, op, r, x, y, gy, gx);                 // gx += ...
//   nitro::cuda::softmax<float>(stream, /*log=*/true, rows, cols, x, y);
//   nitro::cuda::softmax_backward<float>(stream, true, rows, cols, y, gy, gx);        // gx += ...
//
// tensor/reduction.hpp says what each computes. One block of 256 threads per output value (per
// column for the softmax) when its extent is long, a thread per output otherwise; a block combines
// its threads' partial results in a fixed tree, so a value has the same bits on every run.
#pragma once

#include "nitro/kernels/memory.cuh"  // fill_kernel
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/reduction.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t
#include <limits>   // infinity

namespace nitro::cuda {

namespace detail {

constexpr int reduce_threads = 256;
// Extents from which a block (not a thread) reduces one output.
constexpr std::int64_t block_extent = 64;

// ::exp, ::log (CUDA's device overloads): nitro::exp and nitro::log, the tensor ops, would hide them
// by name wherever nitro/nitro.hpp is included before this header (nitro/main.hpp does).
template <class T> __device__ inline T exp_of(T x) { return ::exp(x); }
template <class T> __device__ inline T log_of(T x) { return ::log(x); }

// The warp's 32 values summed by a butterfly of shuffles: every lane ends with the same bits (each
// level adds the same two partial sums on both lanes).
template <class T>
__device__ inline T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The block's threads combine v (sum, or max when `take_max`) in a fixed order; every thread gets
// the result. `shared` holds reduce_threads values.
template <class T>
__device__ T block_combine(T v, bool take_max, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = reduce_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const T o = shared[threadIdx.x + half];
      shared[threadIdx.x] = take_max ? (o > shared[threadIdx.x] ? o : shared[threadIdx.x]) : shared[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();  // shared is free for the next combine
  return r;
}

// One output (o, i) by one thread.
template <class T>
__device__ T reduce_one(reduce_op op, reduction r, T const* xs) {
  auto at = [&](std::int64_t k) { return xs[k * r.inner]; };
  switch (op) {
    case reduce_op::sum: {
      T v = T(0);
      for (std::int64_t k = 0; k < r.extent; ++k) v += at(k);
      return v;
    }
    case reduce_op::max: {
      T v = r.extent ? at(0) : T(0);
      for (std::int64_t k = 1; k < r.extent; ++k) v = at(k) > v ? at(k) : v;
      return v;
    }
    case reduce_op::logsumexp: {
      T m = at(0);
      for (std::int64_t k = 1; k < r.extent; ++k) m = at(k) > m ? at(k) : m;
      T s = T(0);
      for (std::int64_t k = 0; k < r.extent; ++k) s += exp_of(at(k) - m);
      return m + log_of(s);
    }
    case reduce_op::argmax: {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < r.extent; ++k)
        if (at(k) > at(best)) best = k;
      return static_cast<T>(best);
    }
  }
  return T(0);
}

template <class T>
__global__ void reduce_by_thread(reduce_op op, reduction r, T const* x, T* y) {
  const std::int64_t outputs = r.inner * r.outer;
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < outputs; j += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t o = j / r.inner, i = j % r.inner;
    y[j] = reduce_one(op, r, x + o * r.extent * r.inner + i);
  }
}

// Block b reduces output b (and b + gridDim.x, ...).
template <class T>
__global__ void reduce_by_block(reduce_op op, reduction r, T const* x, T* y) {
  __shared__ T shared[reduce_threads];
  const std::int64_t outputs = r.inner * r.outer;
  for (std::int64_t j = blockIdx.x; j < outputs; j += gridDim.x) {
    const std::int64_t o = j / r.inner, i = j % r.inner;
    T const* xs = x + o * r.extent * r.inner + i;
    if (op == reduce_op::sum) {
      T v = T(0);
      for (std::int64_t k = threadIdx.x; k < r.extent; k += reduce_threads) v += xs[k * r.inner];
      v = block_combine(v, false, shared);
      if (threadIdx.x == 0) y[j] = v;
      continue;
    }
    // max, logsumexp and argmax start from the largest value
    T m = xs[0];
    for (std::int64_t k = threadIdx.x; k < r.extent; k += reduce_threads) m = xs[k * r.inner] > m ? xs[k * r.inner] : m;
    m = block_combine(m, true, shared);
    if (op == reduce_op::max) {
      if (threadIdx.x == 0) y[j] = m;
    } else if (op == reduce_op::logsumexp) {
      T s = T(0);
      for (std::int64_t k = threadIdx.x; k < r.extent; k += reduce_threads) s += exp_of(xs[k * r.inner] - m);
      s = block_combine(s, false, shared);
      if (threadIdx.x == 0) y[j] = m + log_of(s);
    } else {  // argmax: the first position holding the largest value
      T first = T(r.extent);
      for (std::int64_t k = threadIdx.x; k < r.extent; k += reduce_threads)
        if (xs[k * r.inner] == m && T(k) < first) first = T(k);
      first = -block_combine(-first, true, shared);  // the smallest position
      if (threadIdx.x == 0) y[j] = first;
    }
  }
}

template <class T>
__global__ void reduce_backward_by_element(reduce_op op, reduction r, T const* x, T const* y, T const* gy, T* gx) {
  const std::int64_t n = r.inner * r.extent * r.outer;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % r.inner, o = e / (r.inner * r.extent), j = o * r.inner + i;
    if (op == reduce_op::sum) gx[e] += gy[j];
    else gx[e] += gy[j] * exp_of(x[e] - y[j]);  // logsumexp
  }
}
// max: each output's gradient to its first largest input.
template <class T>
__global__ void max_backward(reduction r, T const* x, T const* gy, T* gx) {
  const std::int64_t outputs = r.inner * r.outer;
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < outputs; j += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t o = j / r.inner, i = j % r.inner, first = o * r.extent * r.inner + i;
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < r.extent; ++k)
      if (x[first + k * r.inner] > x[first + best * r.inner]) best = k;
    if (r.extent) gx[first + best * r.inner] += gy[j];
  }
}

// One block per column of `rows` values.
template <class T>
__global__ void softmax_columns(bool log, std::int64_t rows, std::int64_t cols, T const* x, T* y) {
  __shared__ T shared[reduce_threads];
  for (std::int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    T const* xc = x + c * rows;
    T* yc = y + c * rows;
    T m = xc[0];
    for (std::int64_t i = threadIdx.x; i < rows; i += reduce_threads) m = xc[i] > m ? xc[i] : m;
    m = block_combine(m, true, shared);
    T s = T(0);
    for (std::int64_t i = threadIdx.x; i < rows; i += reduce_threads) s += exp_of(xc[i] - m);
    s = block_combine(s, false, shared);
    const T l = m + log_of(s), inv = T(1) / s;
    for (std::int64_t i = threadIdx.x; i < rows; i += reduce_threads) yc[i] = log ? xc[i] - l : exp_of(xc[i] - m) * inv;
  }
}
template <class T>
__global__ void softmax_columns_backward(bool log, std::int64_t rows, std::int64_t cols, T const* y, T const* gy, T* gx) {
  __shared__ T shared[reduce_threads];
  for (std::int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    T const* g = gy + c * rows;
    T const* s = y + c * rows;
    T* o = gx + c * rows;
    T acc = T(0);
    for (std::int64_t i = threadIdx.x; i < rows; i += reduce_threads) acc += log ? g[i] : g[i] * s[i];
    acc = block_combine(acc, false, shared);
    for (std::int64_t i = threadIdx.x; i < rows; i += reduce_threads) o[i] += log ? g[i] - exp_of(s[i]) * acc : s[i] * (g[i] - acc);
  }
}

inline unsigned blocks_of(std::int64_t n, std::int64_t per_block, std::int64_t cap) noexcept {
  const std::int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : b > cap ? cap : b);
}

}  // namespace detail

template <class T>
void reduce(cudaStream_t s, reduce_op op, reduction r, T const* x, T* y) {
  const std::int64_t outputs = r.inner * r.outer;
  if (outputs <= 0) return;
  if (r.extent == 0) {  // a reduction of nothing, as the CPU's: 0, and log 0 = -inf for logsumexp
    const T v = op == reduce_op::logsumexp ? -std::numeric_limits<T>::infinity() : T(0);
    detail::fill_kernel<T><<<detail::blocks_for(static_cast<std::size_t>(outputs)), 256, 0, s>>>(y, static_cast<std::size_t>(outputs), v);
    NITRO_CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (r.extent >= detail::block_extent)
    detail::reduce_by_block<T><<<detail::blocks_of(outputs, 1, 65535), detail::reduce_threads, 0, s>>>(op, r, x, y);
  else
    detail::reduce_by_thread<T><<<detail::blocks_of(outputs, 256, 4096), 256, 0, s>>>(op, r, x, y);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void reduce_backward(cudaStream_t s, reduce_op op, reduction r, T const* x, T const* y, T const* gy, T* gx) {
  const std::int64_t n = r.inner * r.extent * r.outer;
  if (n <= 0 || op == reduce_op::argmax) return;
  if (op == reduce_op::max)
    detail::max_backward<T><<<detail::blocks_of(r.inner * r.outer, 256, 4096), 256, 0, s>>>(r, x, gy, gx);
  else
    detail::reduce_backward_by_element<T><<<detail::blocks_of(n, 256, 4096), 256, 0, s>>>(op, r, x, y, gy, gx);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void softmax(cudaStream_t s, bool log, std::int64_t rows, std::int64_t cols, T const* x, T* y) {
  if (rows <= 0 || cols <= 0) return;
  detail::softmax_columns<T><<<detail::blocks_of(cols, 1, 65535), detail::reduce_threads, 0, s>>>(log, rows, cols, x, y);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void softmax_backward(cudaStream_t s, bool log, std::int64_t rows, std::int64_t cols, T const* y, T const* gy, T* gx) {
  if (rows <= 0 || cols <= 0) return;
  detail::softmax_columns_backward<T><<<detail::blocks_of(cols, 1, 65535), detail::reduce_threads, 0, s>>>(log, rows, cols, y, gy, gx);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
