// nitro/tensor/cuda/data_parallel.cuh — n_devs: single-process data parallelism over the GPUs of one
// machine, NCCL all-reduce over the flat buffers. Available when the build found NCCL
// (NITRO_HAVE_NCCL).
//
//   nitro::cuda::data_parallel dp(n_devs);                  // one NCCL communicator per device
//   std::vector<nitro::cuda_backend> ...; programs[i] on device i, each on its slice of the batch
//   dp.broadcast(param_ptrs, n, streams);                   // replicas start identical
//   ... every replica: forward, loss, backward on its columns of the batch ...
//   dp.all_reduce_mean(grad_ptrs, n, streams);              // one collective over the flat buffer
//   ... every replica: the same optimizer update: the replicas stay identical ...
//
// One collective per flat buffer per step (never one per array), queued on each replica's compute
// stream, so it orders with the step's kernels and the host never waits. A batch of B samples
// splits into n contiguous column blocks (batch last): replica i takes columns
// [i B / n, (i + 1) B / n). Averaging the replicas' mean gradients equals the mean gradient of the
// whole batch when the slices are equal. The CPU backend runs with n_devs = 1 only.
#pragma once

#if !defined(NITRO_HAVE_NCCL)
#if __has_include(<nccl.h>)
#define NITRO_HAVE_NCCL 1
#else
#define NITRO_HAVE_NCCL 0
#endif
#endif

#if NITRO_HAVE_NCCL

#include "nitro/core/error.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>  // messages
#include <vector>  // communicators

namespace nitro::cuda {

inline void check_nccl(ncclResult_t r, char const* call) {
  if (r == ncclSuccess) return;
  throw error("E-CUDA-008", std::string(call) + " failed: " + ncclGetErrorString(r),
              "an NCCL failure: check that every device is visible (CUDA_VISIBLE_DEVICES) and healthy; report it with the call named here");
}
#define NITRO_NCCL_CHECK(...) ::nitro::cuda::check_nccl((__VA_ARGS__), #__VA_ARGS__)

// The columns of a batch of `batch` samples that replica `i` of `n` trains on.
struct batch_slice {
  long long first = 0, count = 0;
};
inline batch_slice slice_of(long long batch, int i, int n) {
  const long long a = batch * i / n, b = batch * (i + 1) / n;
  return {a, b - a};
}

class data_parallel {
 public:
  // Devices 0 .. n_devs-1. E-CUDA-006 when the machine has fewer.
  explicit data_parallel(int n_devs) : m_n(n_devs) {
    const int have = device_count();
    if (n_devs < 1 || n_devs > have)
      throw error("E-CUDA-006",
                  "n_devs = " + std::to_string(n_devs) + " asks for more devices than this machine has (" + std::to_string(have) + ")",
                  "use n_devs between 1 and " + std::to_string(have > 0 ? have : 1));
    m_comms.resize(static_cast<std::size_t>(n_devs));
    std::vector<int> devs(static_cast<std::size_t>(n_devs));
    for (int i = 0; i < n_devs; ++i) devs[static_cast<std::size_t>(i)] = i;
    NITRO_NCCL_CHECK(ncclCommInitAll(m_comms.data(), n_devs, devs.data()));
  }
  ~data_parallel() {
    for (auto c : m_comms)
      if (c) ncclCommDestroy(c);
  }
  data_parallel(data_parallel const&) = delete;
  data_parallel& operator=(data_parallel const&) = delete;

  int size() const noexcept { return m_n; }

  // buffers[i], streams[i]: replica i's device buffer of n floats and its compute stream.
  void all_reduce_mean(float* const* buffers, long long n, cudaStream_t const* streams) {
    NITRO_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < m_n; ++i) {
      device_scope on(i);
      NITRO_NCCL_CHECK(ncclAllReduce(buffers[i], buffers[i], static_cast<std::size_t>(n), ncclFloat32, ncclAvg, m_comms[static_cast<std::size_t>(i)], streams[i]));
    }
    NITRO_NCCL_CHECK(ncclGroupEnd());
  }
  void broadcast(float* const* buffers, long long n, int root, cudaStream_t const* streams) {
    NITRO_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < m_n; ++i) {
      device_scope on(i);
      NITRO_NCCL_CHECK(ncclBroadcast(buffers[i], buffers[i], static_cast<std::size_t>(n), ncclFloat32, root, m_comms[static_cast<std::size_t>(i)], streams[i]));
    }
    NITRO_NCCL_CHECK(ncclGroupEnd());
  }

 private:
  int m_n;
  std::vector<ncclComm_t> m_comms;
};

}  // namespace nitro::cuda

#endif  // NITRO_HAVE_NCCL
