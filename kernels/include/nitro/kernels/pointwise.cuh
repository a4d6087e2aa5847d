// nitro/kernels/pointwise.cuh — element-wise and reduction kernels the layer-by-layer path needs:
// activations and their derivatives, bias gradients, sums of squares.
//
//   activation_forward(kind, z, h, n, stream)           h = act(z)             (h may be z)
//   activation_backward(kind, g, saved, out, n, stream) out = g * act'(saved)  (saved: output, or input for gelu)
//   bias_grad(g, rows, cols, db, stream)                db[r] += sum_c g[r + c rows]
//   sum_squares(x, n, out, stream)                      *out += sum x^2 (double)
// The arithmetic is nitro/tensor/cuda/pointwise.hpp's, shared with the CPU tests.
#pragma once

#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>

#include <algorithm>  // min

namespace nitro::cuda {

namespace kernels {

template <activation_kind A>
__global__ void activation_forward(float const* z, float* h, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    h[i] = act_math<A>::forward(z[i]);
}
template <activation_kind A>
__global__ void activation_backward(float const* g, float const* saved, float* out, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = act_math<A>::backward(g[i], saved[i]);
}

// Each block sums `chunk` columns for every row (threads stride over rows, so reads are coalesced
// along the rows of a column), then adds its partial sums atomically.
template <int = 0>  // a template, so that every translation unit may define it
__global__ void bias_grad(float const* g, int rows, long long cols, int chunk, float* db) {
  const long long c0 = static_cast<long long>(blockIdx.x) * chunk;
  const long long c1 = c0 + chunk < cols ? c0 + chunk : cols;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    float s = 0.0f;
    for (long long c = c0; c < c1; ++c) s += g[r + c * rows];
    atomicAdd(db + r, s);
  }
}

template <int = 0>
__global__ void sum_squares(float const* x, long long n, double* out) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    s += static_cast<double>(x[i]) * x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  __shared__ double part[32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) t += part[w];
    atomicAdd(out, t);
  }
}

}  // namespace kernels

// A grid for n elements: enough blocks to fill the device, grid-stride beyond that.
inline unsigned elementwise_blocks(long long n, int threads = 256) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::min<long long>(b < 1 ? 1 : b, 65535LL * 8));
}

inline void activation_forward(activation_kind a, float const* z, float* h, long long n, cudaStream_t s) {
  if (n <= 0) return;
  const unsigned b = elementwise_blocks(n);
  switch (a) {
    case activation_kind::identity:
      if (h != z) NITRO_CUDA_CHECK(cudaMemcpyAsync(h, z, sizeof(float) * static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s));
      return;
    case activation_kind::relu: kernels::activation_forward<activation_kind::relu><<<b, 256, 0, s>>>(z, h, n); break;
    case activation_kind::tanh: kernels::activation_forward<activation_kind::tanh><<<b, 256, 0, s>>>(z, h, n); break;
    case activation_kind::sigmoid: kernels::activation_forward<activation_kind::sigmoid><<<b, 256, 0, s>>>(z, h, n); break;
    case activation_kind::gelu: kernels::activation_forward<activation_kind::gelu><<<b, 256, 0, s>>>(z, h, n); break;
  }
  check_launch("nitro::cuda::kernels::activation_forward");
}

inline void activation_backward(activation_kind a, float const* g, float const* saved, float* out, long long n, cudaStream_t s) {
  if (n <= 0) return;
  const unsigned b = elementwise_blocks(n);
  switch (a) {
    case activation_kind::identity:
      if (out != g) NITRO_CUDA_CHECK(cudaMemcpyAsync(out, g, sizeof(float) * static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s));
      return;
    case activation_kind::relu: kernels::activation_backward<activation_kind::relu><<<b, 256, 0, s>>>(g, saved, out, n); break;
    case activation_kind::tanh: kernels::activation_backward<activation_kind::tanh><<<b, 256, 0, s>>>(g, saved, out, n); break;
    case activation_kind::sigmoid: kernels::activation_backward<activation_kind::sigmoid><<<b, 256, 0, s>>>(g, saved, out, n); break;
    case activation_kind::gelu: kernels::activation_backward<activation_kind::gelu><<<b, 256, 0, s>>>(g, saved, out, n); break;
  }
  check_launch("nitro::cuda::kernels::activation_backward");
}

inline void bias_grad(float const* g, int rows, long long cols, float* db, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int chunk = 64;
  const long long blocks = (cols + chunk - 1) / chunk;
  const int threads = rows < 256 ? ((rows + 31) / 32) * 32 : 256;
  kernels::bias_grad<><<<static_cast<unsigned>(blocks), threads, 0, s>>>(g, rows, cols, chunk, db);
  check_launch("nitro::cuda::kernels::bias_grad");
}

inline void sum_squares(float const* x, long long n, double* out, cudaStream_t s) {
  if (n <= 0) return;
  kernels::sum_squares<><<<std::min(elementwise_blocks(n), 1024u), 256, 0, s>>>(x, n, out);
  check_launch("nitro::cuda::kernels::sum_squares");
}

}  // namespace nitro::cuda
