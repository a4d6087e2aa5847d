// The NCCL communicator of a job bootstrapped through MPI (nitro::cuda::data_parallel(job, n_devs)),
// run by CTest as `mpirun -np 2 --oversubscribe test_nccl`. Built where CMake finds MPI and NCCL
// (the CUDA toolkit); compiled by the host compiler, since nothing here launches a kernel.
//
// What every machine checks: rank 0's NCCL id reaches every rank byte for byte; ranks that pass
// different n_devs fail together (E-DIST-007); and the communicator's set-up on THIS machine ends
// the same way on every rank, never in a hang:
//   no GPU                      E-CUDA-006 naming rank 0 and its host, on both ranks
//   1 GPU for 2 ranks           E-CUDA-014: both ranks would drive the same GPU (its UUID named)
//   a GPU per rank              the communicator spans the 2 processes: a broadcast from the job's
//                               replica 0 and the mean of every replica's values arrive on each
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <nitro/dist.hpp>
#include <nitro/dist/cuda/data_parallel.cuh>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "../support/nitro_test.hpp"

namespace {

nitro::dist::communicator* world = nullptr;

using nitro_test::error_of;

// Every rank's text, in rank order (to show that the ranks failed the same way).
std::vector<std::string> gathered(std::string const& mine) {
  std::vector<char> all;
  std::vector<std::size_t> sizes;
  world->gather(mine.data(), mine.size(), all, sizes, "the test's texts");
  std::vector<std::string> out;
  std::size_t at = 0;
  for (auto n : sizes) {
    out.emplace_back(all.data() + at, n);
    at += n;
  }
  return out;
}

}  // namespace

TEST_CASE("rank 0's NCCL id reaches every rank, byte for byte") {
  const ncclUniqueId id = nitro::cuda::data_parallel::job_id(*world);
  const std::string bytes(id.internal, sizeof id.internal);
  CHECK(bytes != std::string(sizeof id.internal, '\0'));
  const auto all = gathered(bytes);
  REQUIRE(all.size() == static_cast<std::size_t>(world->size()));
  for (auto const& b : all) CHECK(b == all[0]);
  // a second id is a new communicator's
  const ncclUniqueId again = nitro::cuda::data_parallel::job_id(*world);
  CHECK(std::memcmp(again.internal, id.internal, sizeof id.internal) != 0);
}

TEST_CASE("ranks passing different n_devs fail together with E-DIST-007") {
  if (world->size() < 2) return;
  const std::string e = error_of([] { nitro::cuda::data_parallel dp(*world, 1 + world->rank()); });
  CHECK(e.find("E-DIST-007") != std::string::npos);
  CHECK(e.find("n_devs (devices per process)") != std::string::npos);
}

TEST_CASE("check_peers: another rank's failure notice ends a wait on something that is not MPI (a GPU stream)") {
  if (world->size() < 2) return;
  nitro::dist::communicator side;  // its own duplicate of the world: its failure stays its own
  if (side.rank() == 1) {
    side.notify_failure("E-TEST-001: rank 1 broke");
  } else if (side.rank() == 0) {
    std::string e = "no notice within 20 s";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      try {
        side.check_peers("the test's wait for a stream");
      } catch (nitro::error const& err) {
        e = err.what();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(e.find("E-DIST-005") != std::string::npos);
    CHECK(e.find("rank 1 failed while rank 0 waited in the test's wait for a stream") != std::string::npos);
    CHECK(e.find("E-TEST-001: rank 1 broke") != std::string::npos);
    CHECK(side.failed());  // every later collective of `side` throws the same
  }
  CHECK(world->timeout_seconds() > 0);
  world->barrier("after the notice test");
}

TEST_CASE("the communicator's set-up on this machine: the same outcome on every rank") {
  const int visible = nitro::cuda::device_count();
  const int ranks = world->size();
  if (visible == 0) {
    const std::string e = error_of([] { nitro::cuda::data_parallel dp(*world, 1); });
    CHECK(e.find("E-CUDA-006") != std::string::npos);
    CHECK(e.find("rank 0 (on host '" + nitro::dist::this_host() + "') sees 0 devices") != std::string::npos);
    for (auto const& other : gathered(e)) CHECK(other == e);
    return;
  }
  if (visible < ranks) {  // the ranks of this host share too few GPUs: each would start at device 0
    const std::string e = error_of([] { nitro::cuda::data_parallel dp(*world, 1); });
    CHECK(e.find("E-CUDA-014") != std::string::npos);
    CHECK(e.find("ranks 0 and 1 would both drive it") != std::string::npos);
    for (auto const& other : gathered(e)) CHECK(other == e);
    return;
  }
  nitro::cuda::data_parallel dp(*world, 1);
  CHECK(dp.world_size() == ranks);
  CHECK(dp.first_replica() == world->rank());
  CHECK(dp.device(0) == world->rank());  // one host, shared view: consecutive devices
  nitro::cuda::device_scope on(dp.device(0));
  cudaStream_t s = nullptr;
  NITRO_CUDA_CHECK(cudaStreamCreate(&s));
  constexpr int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = static_cast<float>(world->rank() * n + i);
  nitro::cuda::device_buffer<float> buf(n);
  NITRO_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
  float* ptr = buf.data();
  dp.broadcast(&ptr, n, 0, &s);  // the job's replica 0: rank 0's values everywhere
  dp.end_step(&s);
  dp.synchronize(&s, "the broadcast");
  NITRO_CUDA_CHECK(cudaMemcpy(host.data(), buf.data(), sizeof(float) * n, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i += 97) CHECK(host[static_cast<std::size_t>(i)] == static_cast<float>(i));
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = static_cast<float>(world->rank() + 1);
  NITRO_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
  dp.all_reduce_mean(&ptr, n, &s);
  dp.end_step(&s);
  dp.synchronize(&s, "the all-reduce");
  NITRO_CUDA_CHECK(cudaMemcpy(host.data(), buf.data(), sizeof(float) * n, cudaMemcpyDeviceToHost));
  const float mean = static_cast<float>(ranks + 1) / 2.0f;  // the mean of 1 .. ranks
  CHECK(host[0] == doctest::Approx(mean));
  CHECK(host[n - 1] == doctest::Approx(mean));
  cudaStreamDestroy(s);
}

int main(int argc, char** argv) {
  nitro::dist::session mpi(argc, argv);
  world = &mpi.world();
  doctest::Context ctx(argc, argv);
  if (mpi.rank() != 0) ctx.setOption("no-version", true);
  const int rc = ctx.run();
  std::int64_t failed = rc != 0;
  mpi.world().max(&failed, 1, "the test verdict");
  if (ctx.shouldExit()) return mpi.finish(rc);
  return mpi.finish(failed != 0 ? (rc != 0 ? rc : 1) : 0);
}
