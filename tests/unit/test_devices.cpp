// Which GPUs each rank of a data-parallel job drives (nitro/dist/devices.hpp): the plan every rank
// computes from every rank's report, and the check that no GPU serves two replicas. Pure host code:
// the same plan runs under mpirun on GPU hosts (tests/mpi/test_nccl.cpp).
#include <doctest/doctest.h>

#include <nitro/dist/devices.hpp>

#include <string>
#include <vector>
#include "../support/nitro_test.hpp"

namespace nd = nitro::dist;

namespace {
std::vector<nd::rank_devices> hosts(std::initializer_list<std::pair<char const*, int>> l) {
  std::vector<nd::rank_devices> v;
  for (auto const& [h, n] : l) v.push_back({h, n});
  return v;
}
using nitro_test::error_of;
nd::device_uuid uuid(unsigned char last) {
  nd::device_uuid u{};
  u[0] = 0xab;
  u[15] = last;
  return u;
}
}  // namespace

TEST_CASE("ranks that share a host's view of its GPUs take consecutive blocks of n_devs by local rank") {
  // 2 hosts x 4 processes, 8 GPUs each, 2 devices per process
  const auto all = hosts({{"a", 8}, {"a", 8}, {"a", 8}, {"a", 8}, {"b", 8}, {"b", 8}, {"b", 8}, {"b", 8}});
  const nd::device_plan p5 = nd::plan_devices(5, all, 2);
  CHECK(p5.local_rank == 1);
  CHECK(p5.local_size == 4);
  CHECK_FALSE(p5.own_view);
  CHECK(p5.first_device == 2);   // devices 2 and 3 of host b
  CHECK(p5.nccl_rank == 10);     // rank 5's first device is the job's replica 10 of 16
  CHECK(p5.nccl_size == 16);
  const nd::device_plan p3 = nd::plan_devices(3, all, 2);
  CHECK(p3.first_device == 6);
  CHECK(p3.nccl_rank == 6);
  // interleaved placement (round-robin over hosts): local ranks follow rank order within a host
  const auto rr = hosts({{"a", 2}, {"b", 2}, {"a", 2}, {"b", 2}});
  CHECK(nd::plan_devices(2, rr, 1).first_device == 1);
  CHECK(nd::plan_devices(3, rr, 1).first_device == 1);
  CHECK(nd::plan_devices(1, rr, 1).first_device == 0);
}

TEST_CASE("ranks that each see their own devices (Slurm --gpus-per-task, CUDA_VISIBLE_DEVICES per rank) start at device 0") {
  const auto all = hosts({{"n1", 1}, {"n1", 1}, {"n1", 1}, {"n1", 1}});
  const nd::device_plan p = nd::plan_devices(2, all, 1);
  CHECK(p.own_view);
  CHECK(p.first_device == 0);
  CHECK(p.local_rank == 2);
  CHECK(p.nccl_rank == 2);
  CHECK(p.nccl_size == 4);
}

TEST_CASE("a rank that sees fewer devices than n_devs is E-CUDA-006, the same message on every rank") {
  const auto all = hosts({{"gpu1", 4}, {"cpu7", 0}});
  const std::string on0 = error_of([&] { nd::plan_devices(0, all, 1); });
  const std::string on1 = error_of([&] { nd::plan_devices(1, all, 1); });
  CHECK(on0 == on1);
  CHECK(on0.find("E-CUDA-006") != std::string::npos);
  CHECK(on0.find("rank 1 (on host 'cpu7') sees 0 devices") != std::string::npos);
  CHECK(on0.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  const std::string two = error_of([&] { nd::plan_devices(0, hosts({{"g", 1}}), 2); });
  CHECK(two.find("n_devs = 2 (devices per process), but rank 0 (on host 'g') sees 1 device") != std::string::npos);
  CHECK(two.find("use n_devs <= 1") != std::string::npos);
  CHECK(error_of([&] { nd::plan_devices(0, hosts({{"g", 1}}), 0); }).find("E-CUDA-006") != std::string::npos);
}

TEST_CASE("no GPU serves two replicas: E-CUDA-014 names the GPU, its host and the ranks") {
  const std::vector<std::string> h = {"n1", "n1", "n2"};
  CHECK_NOTHROW(nd::require_distinct_devices({{uuid(1)}, {uuid(2)}, {uuid(3)}}, h, 1));
  const std::string shared = error_of([&] { nd::require_distinct_devices({{uuid(1)}, {uuid(1)}, {uuid(3)}}, h, 1); });
  CHECK(shared.find("E-CUDA-014") != std::string::npos);
  CHECK(shared.find("GPU GPU-ab000000-0000-0000-0000-000000000001 on host 'n1': ranks 0 and 1 would both drive it") != std::string::npos);
  CHECK(shared.find("--gpus-per-task") != std::string::npos);
  const std::string twice = error_of([&] { nd::require_distinct_devices({{uuid(1), uuid(1)}}, {"n1"}, 2); });
  CHECK(twice.find("rank 0 would drive it twice") != std::string::npos);
}

TEST_CASE("one process: the plan through single_process replicas is device 0 .. n_devs-1, replicas 0 .. n_devs-1") {
  nd::single_process one;
  const nd::device_plan p = nd::plan_devices(one, 2, 4, "here");
  CHECK(p.first_device == 0);
  CHECK(p.nccl_rank == 0);
  CHECK(p.nccl_size == 2);
  CHECK_NOTHROW(nd::require_distinct_devices(one, {uuid(7), uuid(8)}, 2, "here"));
  CHECK(error_of([&] { nd::require_distinct_devices(one, {uuid(7), uuid(7)}, 2, "here"); }).find("E-CUDA-014") != std::string::npos);
  CHECK(nd::uuid_text(uuid(0x3c)) == "GPU-ab000000-0000-0000-0000-00000000003c");
  // fewer UUIDs than n_devs: a coded error, never a read past the report
  CHECK(error_of([&] { nd::require_distinct_devices(one, {uuid(7)}, 2, "here"); }).find("E-DIST-007: rank 0 reported 1 GPU UUIDs, not n_devs = 2") != std::string::npos);
}
