// nitro/kernels/copy.cuh — copies between shapes on the GPU: the CUDA side of device_ops::copy and
// transpose (slices, concatenations, transposes, and their backward, which accumulate).
//
//   nitro::cuda::copy<float>(stream, rows, cols, src, ld_src, dst, ld_dst, /*accumulate=*/false);
//   nitro::cuda::transpose<float>(stream, m, n, src, dst, /*accumulate=*/true);   // dst += src^T
//
// Column-major blocks, as the kernels table says. A plain copy is cudaMemcpy2DAsync; an accumulating
// one and a transpose are kernels (the transpose through a 32 x 32 tile in shared memory, so both its
// reads and its writes are coalesced). Queued on `stream`.
#pragma once

#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {

template <class T>
__global__ void add_block(std::int64_t rows, std::int64_t cols, T const* src, std::int64_t ld_src, T* dst, std::int64_t ld_dst) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % rows, j = e / rows;
    dst[i + j * ld_dst] += src[i + j * ld_src];
  }
}

constexpr int transpose_tile = 32;
// dst (n x m) = or += src (m x n)^T; block (bx, by) moves the tile of src rows bx*32.., columns by*32..
template <class T>
__global__ void transpose_tiles(std::int64_t m, std::int64_t n, T const* src, T* dst, bool accumulate) {
  __shared__ T tile[transpose_tile][transpose_tile + 1];  // +1: no bank conflicts on the transposed read
  const std::int64_t r0 = std::int64_t(blockIdx.x) * transpose_tile, c0 = std::int64_t(blockIdx.y) * transpose_tile;
  for (int k = threadIdx.y; k < transpose_tile; k += blockDim.y) {
    const std::int64_t r = r0 + threadIdx.x, c = c0 + k;
    if (r < m && c < n) tile[k][threadIdx.x] = src[r + c * m];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < transpose_tile; k += blockDim.y) {
    const std::int64_t r = c0 + threadIdx.x, c = r0 + k;  // dst row (a src column), dst column (a src row)
    if (r < n && c < m) {
      T& d = dst[r + c * n];
      d = accumulate ? d + tile[threadIdx.x][k] : tile[threadIdx.x][k];
    }
  }
}

}  // namespace detail

template <class T>
void copy(cudaStream_t s, std::int64_t rows, std::int64_t cols, T const* src, std::int64_t ld_src, T* dst, std::int64_t ld_dst, bool accumulate) {
  if (rows <= 0 || cols <= 0) return;
  if (!accumulate) {
    NITRO_CUDA_CHECK(cudaMemcpy2DAsync(dst, sizeof(T) * static_cast<std::size_t>(ld_dst), src, sizeof(T) * static_cast<std::size_t>(ld_src),
                                       sizeof(T) * static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), cudaMemcpyDeviceToDevice, s));
    return;
  }
  const std::int64_t n = rows * cols, blocks = (n + 255) / 256;
  detail::add_block<T><<<static_cast<unsigned>(blocks > 4096 ? 4096 : blocks), 256, 0, s>>>(rows, cols, src, ld_src, dst, ld_dst);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void transpose(cudaStream_t s, std::int64_t m, std::int64_t n, T const* src, T* dst, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  const dim3 grid(static_cast<unsigned>((m + detail::transpose_tile - 1) / detail::transpose_tile),
                  static_cast<unsigned>((n + detail::transpose_tile - 1) / detail::transpose_tile));
  detail::transpose_tiles<T><<<grid, dim3(detail::transpose_tile, 8), 0, s>>>(m, n, src, dst, accumulate);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
