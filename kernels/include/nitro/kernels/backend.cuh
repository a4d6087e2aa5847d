// nitro/kernels/backend.cuh — the CUDA backend: the machine a step runs on when it runs on a GPU.
//
//   nitro::cuda_backend be(/*device=*/0);
//   nitro::Tensor img = be.to_device("img", batch.img);   // what the handle calls per declared field
//   be.mirror_scalars(block.data(), block.bytes());       // the device-scalar block, once per step
//   some_kernel<<<..., be.compute()>>>(img.data(), be.scalars(), ...);
//   be.transfers_of("img").bytes                           // counted like the CPU backend's
//
// The interface of nitro::cpu_backend (tensor/backend.hpp) — to_device(field, tensor), ops() (the
// kernels table, kernels/ops.cuh), transfers(), transfers_of(), reset_counts(): it models Backend —
// plus what a device needs: two streams (compute, and copy for
// the batches), the mirrored scalar block, and the cuBLASLt / cuDNN handles and plan caches.
//
// Transfers: each field has a ring of `depth` pinned staging buffers and device buffers. to_device
// copies the host tensor into the next pinned buffer, queues the host-to-device copy on the copy
// stream and makes the compute stream wait for it (an event, not a host synchronisation); it
// returns at once with a tensor viewing the device buffer. The next batch's copy therefore runs
// while the current step computes — the prefetch. A device buffer is reused only after the compute
// work queued before the field's next to_device has finished (an event the copy stream waits on),
// so a batch tensor stays valid until the next to_device of the same field. Buffers grow at the
// first batch (or a larger one) and are reused afterwards: no allocation per step.
//
// Memory: memory() is the device_memory (kernels/memory.cuh) a step arena on this GPU takes its
// chunks from, its zeros and fills queued on the compute stream.
//
// Device scalars: mirror_scalars copies the host block (the handle's, or a nitro::cuda::scalar_block)
// into a pinned buffer and queues its copy to the device block on the compute stream, in order with
// the step's kernels; it skips the copy when nothing changed. Kernels read values through
// scalar_ref::read(be.scalars()).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/dense_lt.cuh"
#include "nitro/kernels/memory.cuh"
#include "nitro/kernels/ops.cuh"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/device.hpp"
#include "nitro/tensor/tensor.hpp"

#if defined(NITRO_HAVE_CUDNN) && NITRO_HAVE_CUDNN
#include "nitro/kernels/cudnn.cuh"
#endif

#include <cuda_runtime.h>

#include <cstdint>      // int64_t
#include <cstring>      // memcpy, memcmp
#include <functional>   // less<>
#include <map>          // transfer counts
#include <memory>       // rings
#include <string>       // field names
#include <string_view>  // field names
#include <vector>       // rings

namespace nitro {

class cuda_backend {
 public:
  static constexpr device_kind device = device_kind::cuda;
  static constexpr char const* name() noexcept { return "cuda"; }

  // device: which GPU; depth: batches of one field that may be in flight (2 overlaps one copy
  // with one step; 3 leaves slack for a slow host).
  explicit cuda_backend(int device = 0, int depth = 3) : m_device(device), m_depth(depth < 1 ? 1 : depth) {
    const int n = cuda::device_count();
    if (n == 0)
      throw error("E-CUDA-002", "the CUDA backend found no CUDA device (cudaGetDeviceCount reports none)",
                  "run on a machine with an NVIDIA GPU and driver, or use the CPU backend");
    if (device < 0 || device >= n)
      throw error("E-CUDA-006", "CUDA device " + std::to_string(device) + " was asked for; this machine has " + std::to_string(n),
                  "pick a device between 0 and " + std::to_string(n - 1) + " (or fewer devices with n_devs)");
    cuda::device_scope on(m_device);
    m_compute = std::make_unique<cuda::stream>();
    m_copy = std::make_unique<cuda::stream>();
    m_memory = std::make_unique<cuda::stream_memory>(m_device, m_compute->get());
    m_ops = std::make_unique<cuda::ops>(m_device, m_compute->get(), *m_memory);
    for (int i = 0; i < scalar_ring; ++i) m_scalar_ready.emplace_back();
  }
  cuda_backend(cuda_backend const&) = delete;
  cuda_backend& operator=(cuda_backend const&) = delete;
  ~cuda_backend() {
    cudaSetDevice(m_device);
    if (m_compute) cudaStreamSynchronize(m_compute->get());
    if (m_copy) cudaStreamSynchronize(m_copy->get());
  }

  int device_id() const noexcept { return m_device; }
  cudaStream_t compute() const noexcept { return m_compute->get(); }
  cudaStream_t copy() const noexcept { return m_copy->get(); }
  // Device memory for a step arena, zeroed, filled and copied in order on the compute stream.
  cuda::stream_memory& memory() const noexcept { return *m_memory; }
  // The kernels table (kernels/ops.cuh) a step on this GPU runs: every op and loss, the products
  // through cuBLASLt, all on the compute stream.
  device_ops& ops() const noexcept { return *m_ops; }
  // The same table as CUDA's own: TF32, its cuBLASLt plans, the kernels' flags (check_flags).
  cuda::ops& cuda_ops() const noexcept { return *m_ops; }
  // Waits for everything queued on both streams.
  void synchronize() const {
    cuda::device_scope on(m_device);
    m_copy->synchronize();
    m_compute->synchronize();
  }

  // ---- transfers -----------------------------------------------------------------------------------
  template <class T>
  basic_tensor<T> to_device(std::string_view field, basic_tensor<T> const& host) {
    if (host.device() == device_kind::cuda) return host;
    if (!host.defined() && host.numel() > 0)
      throw error("E-CUDA-007", "to_device(\"" + std::string(field) + "\"): the host tensor has no memory",
                  "pass the batch field the loader produced");
    cuda::device_scope on(m_device);
    const std::size_t bytes = static_cast<std::size_t>(host.numel()) * sizeof(T);
    ring& r = ring_of(field);
    if (r.last >= 0) r.slots[static_cast<std::size_t>(r.last)].consumed.record(compute());
    slot& s = r.slots[static_cast<std::size_t>(r.next)];
    if (s.used) s.copied.synchronize();  // its staging buffer is free again
    if (s.dev.capacity() < bytes || s.pin.capacity() < bytes) {
      synchronize();  // growing: nothing may still read the old buffers
      s.dev.reserve(bytes);
      s.pin.reserve(bytes);
    }
    if (bytes) std::memcpy(s.pin.data(), host.data(), bytes);
    if (s.used) s.consumed.wait_on(copy());
    if (bytes) NITRO_CUDA_CHECK(cudaMemcpyAsync(s.dev.data(), s.pin.data(), bytes, cudaMemcpyHostToDevice, copy()));
    s.copied.record(copy());
    s.copied.wait_on(compute());
    s.used = true;
    r.last = r.next;
    r.next = (r.next + 1) % m_depth;
    transfer_count& c = count_of(field);
    c.transfers += 1;
    c.bytes += static_cast<std::int64_t>(bytes);
    basic_tensor<T> d(reinterpret_cast<T*>(s.dev.data()), host.shape());
    d.set_memory(m_memory.get());
    return d;
  }

  // An owned host copy of a device tensor (waits for the compute stream).
  template <class T>
  basic_tensor<T> to_host(basic_tensor<T> const& dev) const {
    if (dev.device() != device_kind::cuda) return dev.clone();
    cuda::device_scope on(m_device);
    basic_tensor<T> h = basic_tensor<T>::owned(dev.shape());
    NITRO_CUDA_CHECK(cudaMemcpyAsync(h.data(), dev.data(), sizeof(T) * static_cast<std::size_t>(dev.numel()), cudaMemcpyDeviceToHost, compute()));
    m_compute->synchronize();
    return h;
  }

  std::map<std::string, transfer_count, std::less<>> const& transfers() const noexcept { return m_counts; }
  transfer_count transfers_of(std::string_view field) const {
    auto it = m_counts.find(field);
    return it == m_counts.end() ? transfer_count{} : it->second;
  }
  void reset_counts() { m_counts.clear(); }

  // ---- device scalars -------------------------------------------------------------------------------
  void mirror_scalars(void const* host_block, std::size_t bytes) {
    if (bytes == 0) return;
    cuda::device_scope on(m_device);
    if (m_scalars.capacity() < bytes) {
      synchronize();
      m_scalars.reserve(bytes);
      for (auto& p : m_scalar_pin) p.reserve(bytes);
      m_last_scalars.assign(bytes, 0);
      m_last_bytes = 0;
    }
    if (bytes == m_last_bytes && std::memcmp(host_block, m_last_scalars.data(), bytes) == 0) return;
    const int k = m_scalar_next;
    m_scalar_next = (k + 1) % scalar_ring;
    if (m_scalar_used[k]) m_scalar_ready[static_cast<std::size_t>(k)].synchronize();
    if (m_scalar_pin[k].capacity() < bytes) m_scalar_pin[k].reserve(bytes);
    std::memcpy(m_scalar_pin[k].data(), host_block, bytes);
    NITRO_CUDA_CHECK(cudaMemcpyAsync(m_scalars.data(), m_scalar_pin[k].data(), bytes, cudaMemcpyHostToDevice, compute()));
    m_scalar_ready[static_cast<std::size_t>(k)].record(compute());
    m_scalar_used[k] = true;
    std::memcpy(m_last_scalars.data(), host_block, bytes);
    m_last_bytes = bytes;
    ++m_scalar_copies;
  }
  // The mirrored block; null before the first mirror_scalars, where a kernel's slot reads are NaN
  // (scalar_ref::read), so a launch that forgot the mirror shows instead of computing with zeros.
  void const* scalars() const noexcept { return m_scalars.data(); }
  std::int64_t scalar_copies() const noexcept { return m_scalar_copies; }

  // ---- libraries ------------------------------------------------------------------------------------
  // The table's cuBLASLt handle and plan cache, shared with the programs that launch products
  // themselves (train/cuda/program.cuh).
  cublasLtHandle_t lt() { return m_ops->lt(); }
  cuda::lt_gemm& gemm() { return m_ops->products(); }
#if defined(NITRO_HAVE_CUDNN) && NITRO_HAVE_CUDNN
  cudnnHandle_t dnn() {
    if (!m_dnn) {
      cuda::device_scope on(m_device);
      m_dnn = std::make_unique<cuda::dnn_handle>();
    }
    return m_dnn->get();
  }
#endif

 private:
  static constexpr int scalar_ring = 4;
  struct slot {
    cuda::device_buffer<unsigned char> dev;
    cuda::pinned_buffer<unsigned char> pin;
    cuda::event copied, consumed;
    bool used = false;
  };
  struct ring {
    std::string field;
    std::vector<slot> slots;
    int next = 0, last = -1;
  };

  ring& ring_of(std::string_view field) {
    for (auto& r : m_rings)
      if (r->field == field) return *r;
    auto r = std::make_unique<ring>();
    r->field = std::string(field);
    r->slots.resize(static_cast<std::size_t>(m_depth));
    m_rings.push_back(std::move(r));
    return *m_rings.back();
  }
  transfer_count& count_of(std::string_view field) {
    auto it = m_counts.find(field);
    if (it == m_counts.end()) it = m_counts.emplace(std::string(field), transfer_count{}).first;
    return it->second;
  }

  int m_device;
  int m_depth;
  std::unique_ptr<cuda::stream> m_compute, m_copy;
  std::unique_ptr<cuda::stream_memory> m_memory;  // on the compute stream
  std::unique_ptr<cuda::ops> m_ops;               // the kernels table, on the compute stream
  std::vector<std::unique_ptr<ring>> m_rings;
  std::map<std::string, transfer_count, std::less<>> m_counts;

  cuda::device_buffer<unsigned char> m_scalars;
  cuda::pinned_buffer<unsigned char> m_scalar_pin[scalar_ring];
  std::vector<cuda::event> m_scalar_ready;
  bool m_scalar_used[scalar_ring] = {};
  int m_scalar_next = 0;
  std::vector<unsigned char> m_last_scalars;
  std::size_t m_last_bytes = 0;
  std::int64_t m_scalar_copies = 0;

#if defined(NITRO_HAVE_CUDNN) && NITRO_HAVE_CUDNN
  std::unique_ptr<cuda::dnn_handle> m_dnn;
#endif
};

static_assert(Backend<cuda_backend>, "nitro invariant: cuda_backend models the Backend concept");
// nitro::device = nitro::cuda_device{.index = i}: the handle's backend is this one, on GPU i.
template <>
struct cuda_backend_of<cuda_device> {
  using type = cuda_backend;
};

}  // namespace nitro
