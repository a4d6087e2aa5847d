// nitro/kernels/epilogue.cuh — a product's bias and activation on the GPU, where cuBLASLt's own
// epilogue does not fit: the CUDA side of device_ops::gemm_epilogue's tail and epilogue_backward.
//
//   nitro::cuda::bias_activation<float>(stream, act, m, n, ld, bias, acc, z, c);   // c = act(acc + bias), z = acc + bias
//   nitro::cuda::epilogue_backward<float>(stream, act, m, n, gy, yz, g, bias_grad); // g = gy act'(yz); bias_grad += row sums
//
// Each activation's value and derivative is tensor/elementwise.hpp's (map_value / map_derivative),
// the definitions the CPU's Eigen forms are tested against. The bias gradient gives each row one
// column of 8 lanes that sum the columns in a fixed order and combine in a fixed order: no atomics,
// the same bits on every run. Queued on `stream`; nothing waits for the device.
#pragma once

#include "nitro/kernels/elementwise.cuh"  // detail::grid_for
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/elementwise.hpp"
#include "nitro/tensor/epilogue.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {

// The element-wise map an epilogue activation is (identity has none).
NITRO_HD_INLINE map_op map_of(epilogue_act a) {
  switch (a) {
    case epilogue_act::relu: return map_op::relu;
    case epilogue_act::tanh: return map_op::tanh;
    case epilogue_act::sigmoid: return map_op::sigmoid;
    case epilogue_act::gelu: return map_op::gelu;
    case epilogue_act::identity: break;
  }
  return map_op::affine;  // with a = 1, b = 0: the identity
}

template <class T>
NITRO_HD_INLINE T activate(epilogue_act a, T z) {
  return a == epilogue_act::identity ? z : elementwise::map_value(map_of(a), T(1), T(0), z);
}
// act'(.) from yz: relu, tanh and sigmoid differentiate from their output y (relu's y > 0 exactly
// where its x > 0), gelu from its pre-activation z (needs_preactivation).
template <class T>
NITRO_HD_INLINE T activation_derivative(epilogue_act a, T yz) {
  return a == epilogue_act::identity ? T(1) : elementwise::map_derivative(map_of(a), T(1), T(0), yz, yz);
}

template <class T>
__global__ void bias_activation_kernel(epilogue_act act, std::int64_t m, std::int64_t n, std::int64_t ld, T const* bias, T const* acc, T* z,
                                       T* c) {
  const std::int64_t count = m * n;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < count; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % m, at = i + (e / m) * ld;
    const T pre = acc[at] + (bias ? bias[i] : T(0));
    if (z) z[at] = pre;
    c[at] = activate(act, pre);
  }
}

template <class T>
__global__ void epilogue_gradient_kernel(epilogue_act act, std::int64_t count, T const* gy, T const* yz, T* g) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < count; e += std::int64_t(gridDim.x) * blockDim.x)
    g[e] = act == epilogue_act::identity ? gy[e] : gy[e] * activation_derivative(act, yz[e]);  // identity: yz may be null
}

constexpr int bias_rows = 32, bias_lanes = 8;
// Block: 32 rows x 8 lanes; lane l sums columns l, l + 8, ... of its row, then lane 0 adds the
// eight partial sums in lane order.
template <class T>
__global__ void bias_grad_kernel(std::int64_t m, std::int64_t n, T const* g, T* bias_grad) {
  __shared__ T part[bias_lanes][bias_rows];
  const std::int64_t row = std::int64_t(blockIdx.x) * bias_rows + threadIdx.x;
  T s = T(0);
  if (row < m)
    for (std::int64_t j = threadIdx.y; j < n; j += bias_lanes) s += g[row + j * m];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && row < m) {
    T t = part[0][threadIdx.x];
    for (int l = 1; l < bias_lanes; ++l) t += part[l][threadIdx.x];
    bias_grad[row] += t;
  }
}

}  // namespace detail

// c = act(acc + bias) over an m x n block of leading dimension ld (bias: m values, or null); z, when
// not null, receives acc + bias. acc may be z or c (each element is read before it is written).
template <class T>
void bias_activation(cudaStream_t s, epilogue_act act, std::int64_t m, std::int64_t n, std::int64_t ld, T const* bias, T const* acc, T* z,
                     T* c) {
  if (m <= 0 || n <= 0) return;
  detail::bias_activation_kernel<T><<<detail::grid_for(m * n), 256, 0, s>>>(act, m, n, ld, bias, acc, z, c);
  check_launch("nitro::cuda::bias_activation");
}

// g = gy act'(yz) over an m x n contiguous block (g may be gy); then bias_grad (m values, when not
// null) += the row sums of g.
template <class T>
void epilogue_backward(cudaStream_t s, epilogue_act act, std::int64_t m, std::int64_t n, T const* gy, T const* yz, T* g, T* bias_grad) {
  if (m <= 0 || n <= 0) return;
  if (act != epilogue_act::identity || g != gy) {
    detail::epilogue_gradient_kernel<T><<<detail::grid_for(m * n), 256, 0, s>>>(act, m * n, gy, yz, g);
    check_launch("nitro::cuda::epilogue_backward");
  }
  if (bias_grad) {
    const dim3 block(detail::bias_rows, detail::bias_lanes);
    detail::bias_grad_kernel<T><<<static_cast<unsigned>((m + detail::bias_rows - 1) / detail::bias_rows), block, 0, s>>>(m, n, g, bias_grad);
    check_launch("nitro::cuda::epilogue_backward (bias gradient)");
  }
}

}  // namespace nitro::cuda
