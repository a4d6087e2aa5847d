// nitro/tensor/cuda/runtime.cuh — the CUDA runtime as the backend uses it: checked calls that
// become nitro::error, and owners of device memory, pinned host memory, streams and events.
//
//   NITRO_CUDA_CHECK(cudaMemcpyAsync(...));        // E-CUDA-001 naming the call, on failure
//   nitro::cuda::device_buffer<float> w(n);        // cudaMalloc'd, freed by the destructor
//   w.reserve(m);                                  // grows (never shrinks); contents not kept
//   nitro::cuda::pinned_buffer<float> staging(n);  // page-locked host memory for async copies
//   nitro::cuda::device_count()                    // 0 on a machine without a GPU (never throws)
//
// Compiled by nvcc (it is included by the .cuh headers of the backend); nothing here launches a
// kernel.
#pragma once

#include "nitro/core/error.hpp"

#include <cuda_runtime.h>

#include <cstddef>  // size_t
#include <string>   // messages
#include <utility>  // exchange

namespace nitro::cuda {

inline void check(cudaError_t e, char const* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky launch error so the next call reports its own
  if (e == cudaErrorMemoryAllocation)
    throw error("E-CUDA-003", std::string(call) + " ran out of device memory (" + cudaGetErrorString(e) + ")",
                "use a smaller batch_size or a narrower model, or free the device of other processes");
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
    throw error("E-CUDA-002", std::string(call) + " found no usable CUDA device (" + cudaGetErrorString(e) + ")",
                "run on a machine with an NVIDIA GPU and driver, or use the CPU backend");
  throw error("E-CUDA-001", std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")",
              "this is a CUDA failure: check the device (nvidia-smi) and the driver; report it with the call named here");
}

#define NITRO_CUDA_CHECK(...) ::nitro::cuda::check((__VA_ARGS__), #__VA_ARGS__)

// The devices the runtime sees; 0 (not an exception) when there are none or no driver.
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// Makes `device` current for a scope.
class device_scope {
 public:
  explicit device_scope(int device) {
    NITRO_CUDA_CHECK(cudaGetDevice(&m_prev));
    if (device != m_prev) NITRO_CUDA_CHECK(cudaSetDevice(device));
  }
  ~device_scope() { cudaSetDevice(m_prev); }
  device_scope(device_scope const&) = delete;
  device_scope& operator=(device_scope const&) = delete;

 private:
  int m_prev = 0;
};

// Device memory for n elements of T. reserve(n) grows it (the contents are not kept); it never
// shrinks, so a buffer sized at the first step serves every later step without allocating.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t n) { reserve(n); }
  device_buffer(device_buffer&& o) noexcept : m_p(std::exchange(o.m_p, nullptr)), m_n(std::exchange(o.m_n, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      m_p = std::exchange(o.m_p, nullptr);
      m_n = std::exchange(o.m_n, 0);
    }
    return *this;
  }
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  ~device_buffer() { release(); }

  // true when it had to allocate
  bool reserve(std::size_t n) {
    if (n <= m_n) return false;
    release();
    void* p = nullptr;
    NITRO_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    m_p = static_cast<T*>(p);
    m_n = n;
    return true;
  }
  void zero_async(cudaStream_t s, std::size_t n) { if (n) NITRO_CUDA_CHECK(cudaMemsetAsync(m_p, 0, n * sizeof(T), s)); }
  void zero_async(cudaStream_t s) { zero_async(s, m_n); }

  T* data() noexcept { return m_p; }
  T const* data() const noexcept { return m_p; }
  std::size_t capacity() const noexcept { return m_n; }

 private:
  void release() noexcept {
    if (m_p) cudaFree(m_p);
    m_p = nullptr;
    m_n = 0;
  }
  T* m_p = nullptr;
  std::size_t m_n = 0;
};

// Page-locked host memory: what asynchronous copies need to overlap with compute.
template <class T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t n) { reserve(n); }
  pinned_buffer(pinned_buffer&& o) noexcept : m_p(std::exchange(o.m_p, nullptr)), m_n(std::exchange(o.m_n, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      release();
      m_p = std::exchange(o.m_p, nullptr);
      m_n = std::exchange(o.m_n, 0);
    }
    return *this;
  }
  pinned_buffer(pinned_buffer const&) = delete;
  pinned_buffer& operator=(pinned_buffer const&) = delete;
  ~pinned_buffer() { release(); }

  bool reserve(std::size_t n) {
    if (n <= m_n) return false;
    release();
    void* p = nullptr;
    NITRO_CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)));
    m_p = static_cast<T*>(p);
    m_n = n;
    return true;
  }
  T* data() noexcept { return m_p; }
  std::size_t capacity() const noexcept { return m_n; }

 private:
  void release() noexcept {
    if (m_p) cudaFreeHost(m_p);
    m_p = nullptr;
    m_n = 0;
  }
  T* m_p = nullptr;
  std::size_t m_n = 0;
};

class stream {
 public:
  stream() { NITRO_CUDA_CHECK(cudaStreamCreateWithFlags(&m_s, cudaStreamNonBlocking)); }
  ~stream() { if (m_s) cudaStreamDestroy(m_s); }
  stream(stream const&) = delete;
  stream& operator=(stream const&) = delete;
  cudaStream_t get() const noexcept { return m_s; }
  operator cudaStream_t() const noexcept { return m_s; }  // NOLINT: a stream is used where a handle is
  void synchronize() const { NITRO_CUDA_CHECK(cudaStreamSynchronize(m_s)); }

 private:
  cudaStream_t m_s = nullptr;
};

class event {
 public:
  explicit event(bool timing = false) { NITRO_CUDA_CHECK(cudaEventCreateWithFlags(&m_e, timing ? cudaEventDefault : cudaEventDisableTiming)); }
  ~event() { if (m_e) cudaEventDestroy(m_e); }
  event(event&& o) noexcept : m_e(std::exchange(o.m_e, nullptr)) {}
  event& operator=(event&& o) noexcept {
    if (this != &o) {
      if (m_e) cudaEventDestroy(m_e);
      m_e = std::exchange(o.m_e, nullptr);
    }
    return *this;
  }
  event(event const&) = delete;
  event& operator=(event const&) = delete;
  cudaEvent_t get() const noexcept { return m_e; }
  void record(cudaStream_t s) { NITRO_CUDA_CHECK(cudaEventRecord(m_e, s)); }
  void wait_on(cudaStream_t s) const { NITRO_CUDA_CHECK(cudaStreamWaitEvent(s, m_e, 0)); }
  void synchronize() const { NITRO_CUDA_CHECK(cudaEventSynchronize(m_e)); }
  // milliseconds between two recorded timing events
  float since(event const& start) const {
    float ms = 0;
    NITRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start.m_e, m_e));
    return ms;
  }

 private:
  cudaEvent_t m_e = nullptr;
};

// A kernel launch's error (bad configuration, too much shared memory), named after the kernel.
inline void check_launch(char const* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace nitro::cuda
