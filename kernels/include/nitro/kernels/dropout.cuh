// nitro/kernels/dropout.cuh — dropout on the GPU: the CUDA side of device_ops::dropout and its
// backward.
//
//   nitro::cuda::dropout<float>(stream, seed, below, n, scale, x, y);
//   nitro::cuda::dropout_backward<float>(stream, seed, below, n, scale, gy, gx);
//
// A thread per element reads its fate from tensor/dropout_mask.hpp's counter-based definition, the
// one the CPU's loop reads, so both drop the same elements and the backward redraws the mask
// instead of keeping it. Nothing waits for the device.
#pragma once

#include "nitro/kernels/elementwise.cuh"  // grid_for
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/dropout_mask.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t, uint64_t

namespace nitro::cuda {

namespace detail {
template <class T>
__global__ void dropout_kernel(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* x, T* y) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] = dropout_mask::keeps(seed, i, below) ? x[i] * scale : T(0);
}
template <class T>
__global__ void dropout_backward_kernel(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* gy, T* gx) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    if (dropout_mask::keeps(seed, i, below)) gx[i] += gy[i] * scale;
}
}  // namespace detail

template <class T>
void dropout(cudaStream_t s, std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* x, T* y) {
  if (n <= 0) return;
  detail::dropout_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(seed, below, n, scale, x, y);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void dropout_backward(cudaStream_t s, std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* gy, T* gx) {
  if (n <= 0) return;
  detail::dropout_backward_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(seed, below, n, scale, gy, gx);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
