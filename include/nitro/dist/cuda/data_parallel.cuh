// nitro/dist/cuda/data_parallel.cuh — data parallelism over GPUs with NCCL: n_devs devices of one
// process, or n_devs devices of each of the K processes of an MPI job (one communicator spanning
// hosts). Available when the build found NCCL (NITRO_HAVE_NCCL).
//
//   nitro::cuda::data_parallel dp(n_devs);                  // one process: devices 0 .. n_devs-1
//   nitro::cuda::data_parallel dp(mpi.world(), n_devs);     // a job: K processes x n_devs devices
//   ... replica i of this process drives dp.device(i), trains on slice_of(B, dp.first_replica() + i, dp.world_size())
//   dp.broadcast(param_ptrs, n, 0, streams);                // replicas start identical (the job's replica 0)
//   ... every replica: forward, loss, backward on its columns of the batch ...
//   dp.all_reduce_mean(grad_ptrs, n, streams);              // one collective over the flat buffer
//   ... every replica: the same optimizer update: the replicas stay identical ...
//   dp.end_step(streams);                                   // keeps the host <= 2 steps ahead, with a deadline
//
// One collective per flat buffer per step (never one per array), queued on each replica's compute
// stream, so it orders with the step's kernels. A batch of B samples splits into world_size()
// contiguous column blocks (batch last): replica g of the job takes columns [g B / n, (g + 1) B / n),
// replica g being device d of rank r with g = r x n_devs + d. Averaging the replicas' mean gradients
// equals the mean gradient of the whole batch when the slices are equal.
//
// Across processes (nitro::dist::replicas, over MPI: nitro/dist/communicator.hpp) the communicator
// is bootstrapped through MPI: every rank reports its host and visible devices and takes its devices
// by the plan of nitro/dist/devices.hpp (the same error on every rank when a rank sees too few,
// E-CUDA-006, or two ranks would share a GPU, E-CUDA-014); rank 0's ncclGetUniqueId is broadcast
// over MPI; each process then joins with ncclCommInitRankConfig for each of its devices, one group.
// The communicators are non-blocking (ncclConfig_t::blocking = 0), so no call here waits without a
// deadline: the set-up, end_step() and synchronize() poll NCCL's state and the streams against
// the job's deadline (NITRO_DIST_TIMEOUT) while watching for another rank's failure notice; a
// rank that died or hangs fails the run with E-DIST-003/005 and the communicators are aborted
// (ncclCommAbort), never a hang inside NCCL. The CPU backend runs with n_devs = 1 only.
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
#include "nitro/dist/devices.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>        // event rings
#include <chrono>       // deadlines
#include <cstring>      // memcpy
#include <string>       // messages
#include <string_view>  // labels
#include <thread>       // sleep_for
#include <vector>       // communicators

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
  // One process: devices 0 .. n_devs-1. E-CUDA-006 when the machine has fewer.
  explicit data_parallel(int n_devs) : m_n(n_devs), m_world(n_devs) {
    const int have = device_count();
    if (n_devs < 1 || n_devs > have)
      throw error("E-CUDA-006",
                  "n_devs = " + std::to_string(n_devs) + " asks for more devices than this machine has (" + std::to_string(have) + ")",
                  "use n_devs between 1 and " + std::to_string(have > 0 ? have : 1));
    m_comms.resize(static_cast<std::size_t>(n_devs));
    m_devices.resize(static_cast<std::size_t>(n_devs));
    for (int i = 0; i < n_devs; ++i) m_devices[static_cast<std::size_t>(i)] = i;
    NITRO_NCCL_CHECK(ncclCommInitAll(m_comms.data(), n_devs, m_devices.data()));
    make_events();
  }

  // A job: every rank of `job` drives n_devs devices; one communicator over all ranks x n_devs.
  // Every rank makes it at the same point (it is collective). Errors are nitro::error on every
  // rank: E-DIST-007 (n_devs differs), E-CUDA-006 (a rank sees too few devices), E-CUDA-014 (two
  // ranks would share a GPU), E-CUDA-008 (NCCL refused), E-DIST-003/005 (a rank did not join).
  data_parallel(dist::replicas& job, int n_devs) : m_n(n_devs), m_job(&job) {
    const dist::device_plan plan = dist::plan_devices(job, n_devs, device_count());
    m_world = plan.nccl_size;
    m_first = plan.nccl_rank;
    m_devices.resize(static_cast<std::size_t>(n_devs));
    std::vector<dist::device_uuid> uuids(static_cast<std::size_t>(n_devs));
    for (int d = 0; d < n_devs; ++d) {
      const int dev = plan.first_device + d;
      m_devices[static_cast<std::size_t>(d)] = dev;
      cudaDeviceProp p{};
      NITRO_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
      static_assert(sizeof p.uuid.bytes == 16, "nitro invariant: a CUDA device UUID is 16 bytes");
      std::memcpy(uuids[static_cast<std::size_t>(d)].data(), p.uuid.bytes, 16);
    }
    dist::require_distinct_devices(job, uuids, n_devs);

    const ncclUniqueId id = job_id(job);
    m_comms.assign(static_cast<std::size_t>(n_devs), nullptr);
    try {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // every wait below is ours, with a deadline
      NITRO_NCCL_CHECK(ncclGroupStart());
      for (int d = 0; d < n_devs; ++d) {
        device_scope on(m_devices[static_cast<std::size_t>(d)]);
        in_progress_ok(ncclCommInitRankConfig(&m_comms[static_cast<std::size_t>(d)], m_world, id, m_first + d, &config), "ncclCommInitRankConfig");
      }
      in_progress_ok(ncclGroupEnd(), "ncclGroupEnd (making the communicator)");
      settle("the NCCL communicator's set-up (every rank's devices joining)");
      make_events();
    } catch (...) {
      abort_all();
      throw;
    }
  }

  // The communicator's id on every rank: rank 0's ncclGetUniqueId, broadcast over the job (with
  // whether rank 0 could make one, so that a failure there is every rank's E-CUDA-008).
  static ncclUniqueId job_id(dist::replicas& job) {
    struct id_message {
      int result = ncclSuccess;
      ncclUniqueId id{};
    } msg;
    if (job.rank() == 0) msg.result = ncclGetUniqueId(&msg.id);
    job.broadcast(&msg, sizeof msg, "the NCCL communicator's id (rank 0's ncclGetUniqueId)");
    if (msg.result != ncclSuccess)
      throw error("E-CUDA-008", std::string("ncclGetUniqueId on rank 0 failed: ") + ncclGetErrorString(static_cast<ncclResult_t>(msg.result)),
                  "check rank 0's network interfaces (NCCL_SOCKET_IFNAME) and its NCCL installation; NCCL_DEBUG=INFO says more");
    return msg.id;
  }

  ~data_parallel() {
    for (auto& ring : m_events)
      for (auto e : ring)
        if (e) cudaEventDestroy(e);
    close_all();
  }
  data_parallel(data_parallel const&) = delete;
  data_parallel& operator=(data_parallel const&) = delete;

  int size() const noexcept { return m_n; }                  // replicas (devices) of this process
  int world_size() const noexcept { return m_world; }        // replicas of the job: ranks x n_devs
  int first_replica() const noexcept { return m_first; }     // this process's first replica in the job
  int device(int i) const noexcept { return m_devices[static_cast<std::size_t>(i)]; }  // its runtime index

  // buffers[i], streams[i]: replica i's device buffer of n floats and its compute stream.
  void all_reduce_mean(float* const* buffers, long long n, cudaStream_t const* streams) {
    NITRO_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < m_n; ++i) {
      device_scope on(device(i));
      in_progress_ok(ncclAllReduce(buffers[i], buffers[i], static_cast<std::size_t>(n), ncclFloat32, ncclAvg, m_comms[static_cast<std::size_t>(i)], streams[i]),
                     "ncclAllReduce");
    }
    in_progress_ok(ncclGroupEnd(), "ncclGroupEnd (the gradient all-reduce)");
    settle("the gradient all-reduce (NCCL) being queued");
  }
  // The job's replica `root` (0: rank 0's first device) to every replica.
  void broadcast(float* const* buffers, long long n, int root, cudaStream_t const* streams) {
    NITRO_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < m_n; ++i) {
      device_scope on(device(i));
      in_progress_ok(ncclBroadcast(buffers[i], buffers[i], static_cast<std::size_t>(n), ncclFloat32, root, m_comms[static_cast<std::size_t>(i)], streams[i]),
                     "ncclBroadcast");
    }
    in_progress_ok(ncclGroupEnd(), "ncclGroupEnd (the broadcast)");
    settle("the broadcast (NCCL) being queued");
  }

  // After a step's work is queued: waits (with the deadline) until every replica finished the step
  // two steps back, then marks this one. The host stays at most two steps ahead of the devices, so
  // a collective that never completes (a peer died) is noticed within the deadline, not when the
  // launch queue fills up and the host blocks inside CUDA.
  void end_step(cudaStream_t const* streams) {
    auto& ring = m_events[static_cast<std::size_t>(m_steps % 2)];
    if (m_steps >= 2) wait_events(ring, "the step two steps back (its kernels and gradient all-reduce)");
    for (int i = 0; i < m_n; ++i) {
      device_scope on(device(i));
      NITRO_CUDA_CHECK(cudaEventRecord(ring[static_cast<std::size_t>(i)], streams[i]));
    }
    ++m_steps;
  }
  // Waits (with the deadline) until every replica's stream has run all its work.
  void synchronize(cudaStream_t const* streams, std::string_view what) {
    auto& ring = m_events[static_cast<std::size_t>(m_steps % 2)];
    for (int i = 0; i < m_n; ++i) {
      device_scope on(device(i));
      NITRO_CUDA_CHECK(cudaEventRecord(ring[static_cast<std::size_t>(i)], streams[i]));
    }
    wait_events(ring, what);
  }

 private:
  using clock = std::chrono::steady_clock;

  void make_events() {
    for (auto& ring : m_events) {
      ring.assign(static_cast<std::size_t>(m_n), nullptr);
      for (int i = 0; i < m_n; ++i) {
        device_scope on(device(i));
        NITRO_CUDA_CHECK(cudaEventCreateWithFlags(&ring[static_cast<std::size_t>(i)], cudaEventDisableTiming));
      }
    }
  }

  // A non-blocking communicator answers ncclInProgress while the work is still being set up.
  void in_progress_ok(ncclResult_t r, char const* call) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    abort_all();
    check_nccl(r, call);
  }

  double deadline_seconds() const noexcept { return m_job ? m_job->timeout_seconds() : 600.0; }

  // Polls `done` until it holds; watches the peers and the deadline meanwhile.
  template <class Done>
  void wait_until(Done&& done, std::string_view what) {
    const double limit = deadline_seconds();
    const auto t0 = clock::now();
    for (unsigned spin = 0;; ++spin) {
      if (done()) return;
      if ((spin & 15) == 0) {
        if (m_job) {
          try {
            m_job->check_peers(what);
          } catch (...) {
            abort_all();
            throw;
          }
        }
        if (clock::now() - t0 >= std::chrono::duration<double>(limit)) {
          abort_all();
          const int rank = m_job ? m_job->rank() : 0, ranks = m_job ? m_job->size() : 1;
          throw error("E-DIST-003",
                      "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " waited " + std::to_string(static_cast<long long>(limit)) + " s in " + std::string(what) +
                          " and the other ranks' GPUs did not join it: one of them died, hangs, or lost its network",
                      "see the launcher's output for the rank that ended; NCCL_DEBUG=WARN names the peer NCCL lost; raise NITRO_DIST_TIMEOUT (seconds) "
                      "if a step legitimately takes longer");
        }
      }
      if (spin < 200) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Every communicator out of ncclInProgress; E-CUDA-008 with NCCL's reason when one failed.
  void settle(std::string_view what) {
    wait_until(
        [&] {
          for (auto c : m_comms) {
            ncclResult_t state = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError(c, &state);
            if (r != ncclSuccess) state = r;
            if (state == ncclInProgress) return false;
            if (state != ncclSuccess) {
              char const* detail = ncclGetLastError(c);
              const std::string why = detail && *detail ? std::string(" (") + detail + ")" : std::string();
              abort_all();
              throw error("E-CUDA-008", std::string(what) + " failed: " + ncclGetErrorString(state) + why,
                          "check that every rank's devices are visible and healthy and that the hosts reach each other (NCCL_SOCKET_IFNAME); NCCL_DEBUG=INFO says more");
            }
          }
          return true;
        },
        what);
  }

  void wait_events(std::vector<cudaEvent_t> const& ring, std::string_view what) {
    wait_until(
        [&] {
          for (int i = 0; i < m_n; ++i) {
            const cudaError_t e = cudaEventQuery(ring[static_cast<std::size_t>(i)]);
            if (e == cudaErrorNotReady) return false;
            if (e != cudaSuccess) {
              abort_all();
              check(e, "cudaEventQuery (a replica's step)");
            }
          }
          // a collective that failed inside NCCL (a peer's connection lost) ends the wait too
          for (auto c : m_comms) {
            ncclResult_t state = ncclSuccess;
            if (ncclCommGetAsyncError(c, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
              abort_all();
              check_nccl(state, "an NCCL collective of this step");
            }
          }
          return true;
        },
        what);
  }

  // The orderly end: finalize (for a non-blocking communicator it completes asynchronously, so it is
  // polled, within the deadline) and destroy; a communicator that does not finish in time is aborted.
  void close_all() noexcept {
    if (m_aborted) return;
    for (auto c : m_comms)
      if (c) ncclCommFinalize(c);
    const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(deadline_seconds()));
    for (auto& c : m_comms) {
      if (!c) continue;
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(c, &state) == ncclSuccess && state == ncclInProgress && clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (state == ncclSuccess) ncclCommDestroy(c);
      else ncclCommAbort(c);
      c = nullptr;
    }
  }

  // Ends every communicator at once: kernels waiting on a dead peer return, and the destructor
  // does not wait for them.
  void abort_all() noexcept {
    if (m_aborted) return;
    m_aborted = true;
    for (auto& c : m_comms)
      if (c) {
        ncclCommAbort(c);
        c = nullptr;
      }
  }

  int m_n;
  int m_world = 1;
  int m_first = 0;
  dist::replicas* m_job = nullptr;
  std::vector<int> m_devices;
  std::vector<ncclComm_t> m_comms;
  std::array<std::vector<cudaEvent_t>, 2> m_events;
  long long m_steps = 0;
  bool m_aborted = false;
};

}  // namespace nitro::cuda

#endif  // NITRO_HAVE_NCCL
