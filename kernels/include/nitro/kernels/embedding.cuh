// nitro/kernels/embedding.cuh — the embedding lookup on the GPU: the CUDA side of
// device_ops::embedding and its backward.
//
//   nitro::cuda::embedding<float>(stream, vocab, dim, count, idx, w, y, flags);
//   nitro::cuda::embedding_backward<float>(stream, vocab, dim, count, idx, gy, gw);
//
// The lookup is a thread per output value. A kernel cannot throw: an index that is not a whole
// number in [0, vocab) gets a column of zeros and ors embedding_bad_index into `flags`, which
// cuda::ops::check_flags() raises as the CPU's E-LAYER-005. The backward gives each feature one
// thread, which adds the positions in order (a token met twice sums in the CPU's order): no
// atomics, the same bits on every run, parallel over the features only. Nothing waits for the
// device.
#pragma once

#include "nitro/kernels/elementwise.cuh"  // grid_for
#include "nitro/kernels/reduction.cuh"    // blocks_of
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

inline constexpr unsigned embedding_bad_index = 1u << 8;  // beside metric_sums' loss flags, in the same word

namespace detail {
template <class T>
__device__ bool whole_index(T v, std::int64_t vocab) {
  return v >= T(0) && v < T(vocab) && v == floor(v);
}
template <class T>
__global__ void embedding_kernel(std::int64_t vocab, std::int64_t dim, std::int64_t count, T const* idx, T const* w, T* y, unsigned* flags) {
  const std::int64_t total = count * dim;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t n = e / dim, d = e % dim;
    const T v = idx[n];
    if (whole_index(v, vocab)) {
      y[e] = w[static_cast<std::int64_t>(v) * dim + d];
    } else {
      y[e] = T(0);
      if (d == 0 && flags) atomicOr(flags, embedding_bad_index);
    }
  }
}
template <class T>
__global__ void embedding_backward_kernel(std::int64_t vocab, std::int64_t dim, std::int64_t count, T const* idx, T const* gy, T* gw) {
  const std::int64_t d = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (d >= dim) return;
  for (std::int64_t n = 0; n < count; ++n) {
    const T v = idx[n];
    if (whole_index(v, vocab)) gw[static_cast<std::int64_t>(v) * dim + d] += gy[n * dim + d];
  }
}
}  // namespace detail

template <class T>
void embedding(cudaStream_t s, std::int64_t vocab, std::int64_t dim, std::int64_t count, T const* idx, T const* w, T* y,
               unsigned* flags) {
  if (dim <= 0 || count <= 0) return;
  detail::embedding_kernel<T><<<detail::grid_for(count * dim), 256, 0, s>>>(vocab, dim, count, idx, w, y, flags);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void embedding_backward(cudaStream_t s, std::int64_t vocab, std::int64_t dim, std::int64_t count, T const* idx, T const* gy, T* gw) {
  if (dim <= 0 || count <= 0) return;
  detail::embedding_backward_kernel<T><<<detail::blocks_of(dim, 128, 1u << 30), 128, 0, s>>>(vocab, dim, count, idx, gy, gw);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
