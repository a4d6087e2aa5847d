// nitro/kernels/memory.cuh — device memory for the step arena: what the CUDA backend's kernels read.
//
//   nitro::cuda::stream_memory mem(/*device=*/0, be.compute());
//   nitro::arena a(mem);                        // a step's tensors and gradients on the GPU
//   nitro::arena closures;                      // the tape's closures stay on the host
//   nitro::tape t(a, closures);
//
// The device_memory (tensor/memory.hpp) of one GPU and one stream: chunks are cudaMalloc'd (the
// arena asks for a few per run, then reuses one block), and every zero, fill and copy is queued on
// the stream the step's kernels run on, so a fresh gradient buffer is zero before the kernel that
// accumulates into it, with no host synchronisation. copy_to_host waits for the stream (the host
// reads the values next); copy_from_host takes host memory the caller may free on return.
#pragma once

#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/device.hpp"
#include "nitro/tensor/memory.hpp"

#include <cuda_runtime.h>

#include <cstddef>  // size_t
#include <cstdint>  // int64_t

namespace nitro::cuda {

namespace detail {
template <class T>
__global__ void fill_kernel(T* p, std::size_t n, T v) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) p[i] = v;
}
template <class T>
__global__ void add_kernel(T* p, std::size_t n, T v) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) p[i] += v;
}
// A grid-stride launch: enough blocks to cover n, at most 1024 of them (each thread then takes
// several elements of a large buffer).
inline unsigned blocks_for(std::size_t n) noexcept {
  const std::size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b == 0 ? 1 : b > 1024 ? 1024 : b);
}
}  // namespace detail

class stream_memory final : public device_memory {
 public:
  stream_memory(int device, cudaStream_t stream) noexcept : m_device(device), m_stream(stream) {}

  device_kind device() const noexcept override { return device_kind::cuda; }
  int device_id() const noexcept { return m_device; }
  cudaStream_t stream() const noexcept { return m_stream; }

  // cudaMalloc aligns to 256 bytes, more than any `align` the arena asks for.
  void* allocate(std::size_t bytes, std::size_t) override {
    device_scope on(m_device);
    void* p = nullptr;
    NITRO_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  // The arena frees a chunk when it merges them or dies: whatever the stream still queues on it
  // finishes first (cudaFree waits for the device).
  void deallocate(void* p, std::size_t) noexcept override {
    if (!p) return;
    cudaSetDevice(m_device);
    cudaFree(p);
  }
  void zero(void* p, std::size_t bytes) override {
    if (bytes) NITRO_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, m_stream));
  }
  void fill(float* p, std::size_t count, float v) override { launch_fill(p, count, v); }
  void fill(double* p, std::size_t count, double v) override { launch_fill(p, count, v); }
  void fill(std::int64_t* p, std::size_t count, std::int64_t v) override { launch_fill(p, count, v); }
  void add(float* p, std::size_t count, float v) override { launch_add(p, count, v); }
  void add(double* p, std::size_t count, double v) override { launch_add(p, count, v); }
  // From pageable host memory the runtime stages the bytes before it returns, so `src` may go.
  void copy_from_host(void* dst, void const* src, std::size_t bytes) override {
    if (bytes) NITRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, m_stream));
  }
  void copy_to_host(void* dst, void const* src, std::size_t bytes) override {
    if (!bytes) return;
    NITRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, m_stream));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  }

 private:
  template <class T>
  void launch_fill(T* p, std::size_t n, T v) {
    if (n == 0) return;
    detail::fill_kernel<T><<<detail::blocks_for(n), 256, 0, m_stream>>>(p, n, v);
    NITRO_CUDA_CHECK(cudaGetLastError());
  }
  template <class T>
  void launch_add(T* p, std::size_t n, T v) {
    if (n == 0) return;
    detail::add_kernel<T><<<detail::blocks_for(n), 256, 0, m_stream>>>(p, n, v);
    NITRO_CUDA_CHECK(cudaGetLastError());
  }

  int m_device;
  cudaStream_t m_stream;
};

}  // namespace nitro::cuda
