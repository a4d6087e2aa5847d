// nitro/kernels/elementwise.cuh — element-wise maps and broadcast arithmetic on the GPU: the CUDA
// side of device_ops::map, map_backward, binary and binary_backward.
//
//   nitro::cuda::map<float>(stream, nitro::map_op::gelu, n, 0.f, 0.f, x, y);            // y = gelu(x)
//   nitro::cuda::map_backward<float>(stream, op, n, a, b, x, y, gy, gx);                // gx += gy op'(x)
//   nitro::cuda::binary<float>(stream, nitro::binop::add, plan, a, b, y);               // plan: plan_broadcast
//   nitro::cuda::binary_backward<float>(stream, nitro::binop::mul, plan, a, b, gy, ga, gb);
//
// Each element is tensor/elementwise.hpp's definition, the one the CPU's Eigen forms are tested
// against. The backward of a broadcast input gives each of its elements one thread, which sums
// the output positions that read it in a fixed order: no atomics, the same bits on every run.
// Everything is queued on `stream`; nothing waits for the device.
#pragma once

#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/elementwise.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {

// The plan as a kernel reads it (by value: a launch argument).
struct broadcast_args {
  int rank = 0;
  std::int64_t out[shape::max_rank] = {}, out_stride[shape::max_rank] = {};
  std::int64_t sa[shape::max_rank] = {}, sb[shape::max_rank] = {};
};
inline broadcast_args args_of(broadcast_plan const& p) {
  broadcast_args r;
  r.rank = p.out.rank();
  std::int64_t s = 1;
  for (int d = 0; d < r.rank; ++d) {
    r.out[d] = p.out[d];
    r.out_stride[d] = s;
    s *= p.out[d];
    r.sa[d] = p.sa[d];
    r.sb[d] = p.sb[d];
  }
  return r;
}

inline unsigned grid_for(std::int64_t n) noexcept {
  const std::int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

#define NITRO_DETAIL_GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); i += std::int64_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void map_kernel(map_op op, std::int64_t n, T a, T b, T const* x, T* y) {
  NITRO_DETAIL_GRID_STRIDE(i, n) y[i] = elementwise::map_value(op, a, b, x[i]);
}
template <class T>
__global__ void map_backward_kernel(map_op op, std::int64_t n, T a, T b, T const* x, T const* y, T const* gy, T* gx) {
  NITRO_DETAIL_GRID_STRIDE(i, n) gx[i] += gy[i] * elementwise::map_derivative(op, a, b, x[i], y[i]);
}

template <class T>
__global__ void binary_flat_kernel(binop op, std::int64_t n, T const* a, T const* b, T* y) {
  NITRO_DETAIL_GRID_STRIDE(i, n) y[i] = elementwise::binary_value(op, a[i], b[i]);
}
template <class T>
__global__ void binary_broadcast_kernel(binop op, broadcast_args p, std::int64_t n, T const* a, T const* b, T* y) {
  NITRO_DETAIL_GRID_STRIDE(o, n) {
    std::int64_t ia = 0, ib = 0, rest = o;
    for (int d = 0; d < p.rank; ++d) {
      const std::int64_t c = rest % p.out[d];
      rest /= p.out[d];
      ia += c * p.sa[d];
      ib += c * p.sb[d];
    }
    y[o] = elementwise::binary_value(op, a[ia], b[ib]);
  }
}
template <class T>
__global__ void binary_backward_flat_kernel(binop op, std::int64_t n, T const* a, T const* b, T const* gy, T* ga, T* gb) {
  NITRO_DETAIL_GRID_STRIDE(i, n) {
    if (ga) ga[i] += gy[i] * elementwise::binary_da(op, a[i], b[i]);
    if (gb) gb[i] += gy[i] * elementwise::binary_db(op, a[i], b[i]);
  }
}
// The gradient of one input (`of_a`: a, else b), `count` of its elements: thread i owns element i
// and walks the output positions that read it (the input's broadcast dimensions) in order.
template <class T>
__global__ void binary_backward_input_kernel(binop op, broadcast_args p, bool of_a, std::int64_t count, T const* a, T const* b,
                                             T const* gy, T* gx) {
  std::int64_t const* sx = of_a ? p.sa : p.sb;
  std::int64_t const* so = of_a ? p.sb : p.sa;  // the other input's strides
  NITRO_DETAIL_GRID_STRIDE(i, count) {
    // i's coordinates over the dimensions the input has (stride != 0); the output offset and the
    // other input's offset of the first position that reads it
    std::int64_t rest = i, base_o = 0, base_other = 0, reads = 1;
    for (int d = 0; d < p.rank; ++d) {
      if (sx[d] == 0) {
        reads *= p.out[d];
        continue;
      }
      const std::int64_t c = rest % p.out[d];
      rest /= p.out[d];
      base_o += c * p.out_stride[d];
      base_other += c * so[d];
    }
    T acc = T(0);
    for (std::int64_t k = 0; k < reads; ++k) {  // the broadcast dimensions, first fastest
      std::int64_t kr = k, o = base_o, other = base_other;
      for (int d = 0; d < p.rank; ++d) {
        if (sx[d] != 0) continue;
        const std::int64_t c = kr % p.out[d];
        kr /= p.out[d];
        o += c * p.out_stride[d];
        other += c * so[d];
      }
      const T x = of_a ? a[i] : b[i];
      const T y = of_a ? b[other] : a[other];
      acc += gy[o] * (of_a ? elementwise::binary_da(op, x, y) : elementwise::binary_db(op, y, x));
    }
    gx[i] += acc;
  }
}

#undef NITRO_DETAIL_GRID_STRIDE

inline void launched() { NITRO_CUDA_CHECK(cudaGetLastError()); }

}  // namespace detail

template <class T>
void map(cudaStream_t s, map_op op, std::int64_t n, T a, T b, T const* x, T* y) {
  if (n <= 0) return;
  detail::map_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(op, n, a, b, x, y);
  detail::launched();
}
template <class T>
void map_backward(cudaStream_t s, map_op op, std::int64_t n, T a, T b, T const* x, T const* y, T const* gy, T* gx) {
  if (n <= 0) return;
  detail::map_backward_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(op, n, a, b, x, y, gy, gx);
  detail::launched();
}

template <class T>
void binary(cudaStream_t s, binop op, broadcast_plan const& p, T const* a, T const* b, T* y) {
  const std::int64_t n = p.out.numel();
  if (n <= 0) return;
  if (p.same) detail::binary_flat_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(op, n, a, b, y);
  else detail::binary_broadcast_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(op, detail::args_of(p), n, a, b, y);
  detail::launched();
}

template <class T>
void binary_backward(cudaStream_t s, binop op, broadcast_plan const& p, T const* a, T const* b, T const* gy, T* ga, T* gb) {
  const std::int64_t n = p.out.numel();
  if (n <= 0 || is_comparison(op) || (!ga && !gb)) return;
  if (p.same) {
    detail::binary_backward_flat_kernel<T><<<detail::grid_for(n), 256, 0, s>>>(op, n, a, b, gy, ga, gb);
    return detail::launched();
  }
  const detail::broadcast_args args = detail::args_of(p);
  auto elements = [&](std::int64_t const* sx) {
    std::int64_t c = 1;
    for (int d = 0; d < args.rank; ++d)
      if (sx[d] != 0) c *= args.out[d];
    return c;
  };
  if (ga) {
    const std::int64_t c = elements(args.sa);
    detail::binary_backward_input_kernel<T><<<detail::grid_for(c), 256, 0, s>>>(op, args, true, c, a, b, gy, ga);
    detail::launched();
  }
  if (gb) {
    const std::int64_t c = elements(args.sb);
    detail::binary_backward_input_kernel<T><<<detail::grid_for(c), 256, 0, s>>>(op, args, false, c, a, b, gy, gb);
    detail::launched();
  }
}

}  // namespace nitro::cuda
