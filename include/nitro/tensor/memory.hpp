// nitro/tensor/memory.hpp — where a step's tensors live: the memory a backend hands the step arena.
//
//   nitro::arena a(backend.ops().memory());   // chunks on the backend's device
//   a.memory().zero(p, bytes);                // a fresh gradient buffer, on that device
//
// A backend owns the memory its kernels read: the CPU's is the heap (host_memory), a GPU's is
// device memory. The step arena (arena.hpp) takes its chunks from a device_memory and the tape
// zeroes and seeds gradients through it, so a step's intermediates, gradients and layer scratch sit
// where the backend computes, and nothing on the way there touches them from the host. What the
// host must read (the tape's closures, its variable table) lives in a host arena of its own.
// Whole chunks are asked for (a few per run: the arena merges them after the first step), so a
// virtual call here is never next to the work.
#pragma once

#include "nitro/tensor/device.hpp"

#include <algorithm>  // fill_n
#include <cstddef>    // size_t, byte
#include <cstdint>    // int64_t: index tensors
#include <cstdlib>    // aligned_alloc, free
#include <cstring>    // memset, memcpy
#include <new>        // bad_alloc

namespace nitro {

class device_memory {
 public:
  virtual ~device_memory() = default;
  // Where the memory is: what a tensor made from it says it is on (basic_tensor::device()).
  virtual device_kind device() const noexcept = 0;

  // `bytes` (a multiple of `align`, align a power of two) or std::bad_alloc; and back.
  virtual void* allocate(std::size_t bytes, std::size_t align) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;

  // p[0 .. bytes) = 0.
  virtual void zero(void* p, std::size_t bytes) = 0;
  // p[i] = v, and p[i] += v, for i < count: a tensor made full, and the seed of backward.
  virtual void fill(float* p, std::size_t count, float v) = 0;
  virtual void fill(double* p, std::size_t count, double v) = 0;
  virtual void fill(std::int64_t* p, std::size_t count, std::int64_t v) = 0;
  virtual void add(float* p, std::size_t count, float v) = 0;
  virtual void add(double* p, std::size_t count, double v) = 0;
  // `bytes` from host memory into this memory (a tensor made from host values).
  virtual void copy_from_host(void* dst, void const* src, std::size_t bytes) = 0;
  // `bytes` from this memory into host memory.
  virtual void copy_to_host(void* dst, void const* src, std::size_t bytes) = 0;
};

// The heap: the CPU backend's memory, and the host arena's.
class host_memory final : public device_memory {
 public:
  static host_memory& instance() noexcept {
    static host_memory m;
    return m;
  }
  device_kind device() const noexcept override { return device_kind::cpu; }
  void* allocate(std::size_t bytes, std::size_t align) override {
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override { std::free(p); }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void fill(float* p, std::size_t count, float v) override { std::fill_n(p, count, v); }
  void fill(double* p, std::size_t count, double v) override { std::fill_n(p, count, v); }
  void fill(std::int64_t* p, std::size_t count, std::int64_t v) override { std::fill_n(p, count, v); }
  void add(float* p, std::size_t count, float v) override { add_to(p, count, v); }
  void add(double* p, std::size_t count, double v) override { add_to(p, count, v); }
  void copy_from_host(void* dst, void const* src, std::size_t bytes) override { if (bytes) std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, void const* src, std::size_t bytes) override { if (bytes) std::memcpy(dst, src, bytes); }

 private:
  template <class T>
  static void add_to(T* p, std::size_t count, T v) noexcept {
    for (std::size_t i = 0; i < count; ++i) p[i] += v;
  }
};

}  // namespace nitro
