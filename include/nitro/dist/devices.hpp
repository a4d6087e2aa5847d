// nitro/dist/devices.hpp — which GPUs each rank of a data-parallel job drives, and where its devices
// sit in the job's one NCCL communicator.
//
//   const auto plan = nitro::dist::plan_devices(job, n_devs, nitro::cuda::device_count());
//   // this process drives devices plan.first_device .. plan.first_device + n_devs - 1;
//   // its device d is rank plan.nccl_rank + d of plan.nccl_size in the communicator
//
// A job is K processes (ranks), each driving n_devs GPUs (`n_devs` keeps meaning devices PER
// PROCESS, as in one process). The communicator spans the K x n_devs devices: device d of rank r is
// NCCL rank r x n_devs + d, so the batch's slices are laid out rank after rank, as one process lays
// them out device after device.
//
// Which devices: the ranks on one host (same host name) either share the host's view of its GPUs
// (mpirun -np 4 on an 8-GPU node with n_devs = 2: every process sees all 8) and take consecutive
// blocks of n_devs by their local rank, or each sees its own (Slurm --gpus-per-task, or
// CUDA_VISIBLE_DEVICES set per rank) and starts at its device 0. The plan is computed by every rank
// from every rank's report (host, visible devices), so a mistake is the same error on every rank at
// once, never a rank left waiting for the others. Whether two processes would drive one physical GPU
// is decided by the devices' UUIDs (require_distinct_devices): NCCL refuses a duplicate GPU, and
// the error here says which ranks and how to launch instead.
//
// Needs neither MPI nor CUDA: the reports travel through nitro::dist::replicas.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/dist/replicas.hpp"

#include <array>        // UUIDs
#include <cstddef>      // size_t
#include <cstdio>       // snprintf
#include <cstring>      // memcpy
#include <string>       // host names, messages
#include <string_view>  // host names
#include <vector>       // reports

#include <unistd.h>     // gethostname

namespace nitro::dist {

// What one rank reports about itself.
struct rank_devices {
  std::string host;  // gethostname(): ranks with the same name share a machine
  int visible = 0;   // the devices the CUDA runtime shows this process
};

struct device_plan {
  int n_devs = 1;            // devices per process
  int first_device = 0;      // this process's devices: first_device .. first_device + n_devs - 1
  int local_rank = 0;        // among the processes on this host, in rank order
  int local_size = 1;        // processes on this host
  bool own_view = false;     // the processes of this host see different devices (each starts at 0)
  int nccl_rank = 0;         // this process's first device in the communicator: rank x n_devs
  int nccl_size = 1;         // every device of the job: ranks x n_devs
};

// The plan of rank `rank` given every rank's report (in rank order). E-CUDA-006 when a rank sees
// fewer devices than n_devs; the same error on every rank, since every rank holds every report.
inline device_plan plan_devices(int rank, std::vector<rank_devices> const& all, int n_devs) {
  const int ranks = static_cast<int>(all.size());
  if (n_devs < 1)
    throw error("E-CUDA-006", "n_devs = " + std::to_string(n_devs) + " asks for no device", "use n_devs = 1 or more (devices per process)");
  for (int k = 0; k < ranks; ++k) {
    rank_devices const& r = all[static_cast<std::size_t>(k)];
    if (r.visible < n_devs)
      throw error("E-CUDA-006",
                  "n_devs = " + std::to_string(n_devs) + " (devices per process), but rank " + std::to_string(k) + " (on host '" + r.host + "') sees " +
                      std::to_string(r.visible) + (r.visible == 1 ? " device" : " devices"),
                  r.visible == 0 ? "run every rank on a host with NVIDIA GPUs (check CUDA_VISIBLE_DEVICES and the driver on '" + r.host + "'), or train on the CPU backend"
                                 : "use n_devs <= " + std::to_string(r.visible) + ", or make more devices visible to each rank (CUDA_VISIBLE_DEVICES; Slurm: --gpus-per-task)");
  }
  device_plan p;
  p.n_devs = n_devs;
  p.nccl_rank = rank * n_devs;
  p.nccl_size = ranks * n_devs;
  p.local_size = 0;
  bool all_see_enough = true;  // every process on this host sees room for one block per process
  std::vector<int> local;      // the ranks on this host
  for (int k = 0; k < ranks; ++k)
    if (all[static_cast<std::size_t>(k)].host == all[static_cast<std::size_t>(rank)].host) {
      if (k < rank) ++p.local_rank;
      local.push_back(k);
    }
  p.local_size = static_cast<int>(local.size());
  for (int k : local)
    if (all[static_cast<std::size_t>(k)].visible < p.local_size * n_devs) all_see_enough = false;
  p.own_view = !all_see_enough;
  p.first_device = p.own_view ? 0 : p.local_rank * n_devs;
  return p;
}

using device_uuid = std::array<unsigned char, 16>;

inline std::string uuid_text(device_uuid const& u) {
  // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it
  std::string s = "GPU-";
  char b[3];
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(b, sizeof b, "%02x", u[i]);
    s += b;
  }
  return s;
}

// No physical GPU is driven twice: uuids[r] are rank r's chosen devices (n_devs each), hosts[r] its
// host. E-CUDA-014 naming the first two ranks (or one rank twice) that would share a device.
inline void require_distinct_devices(std::vector<std::vector<device_uuid>> const& uuids, std::vector<std::string> const& hosts, int n_devs) {
  for (std::size_t a = 0; a < uuids.size(); ++a)
    for (std::size_t i = 0; i < uuids[a].size(); ++i)
      for (std::size_t b = a; b < uuids.size(); ++b)
        for (std::size_t j = (b == a ? i + 1 : 0); j < uuids[b].size(); ++j) {
          if (uuids[a][i] != uuids[b][j]) continue;
          const std::string who = a == b ? "rank " + std::to_string(a) + " would drive it twice" : "ranks " + std::to_string(a) + " and " + std::to_string(b) + " would both drive it";
          throw error("E-CUDA-014",
                      "GPU " + uuid_text(uuids[a][i]) + " on host '" + hosts[a] + "': " + who + " (n_devs = " + std::to_string(n_devs) +
                          " devices per process); one GPU serves one replica",
                      "launch at most (GPUs per host) / n_devs processes per host (mpirun --map-by ppr:N:node; Slurm: --ntasks-per-node), "
                      "or give each rank its own devices (Slurm: --gpus-per-task; or CUDA_VISIBLE_DEVICES per rank)");
        }
}

// ---- the same, through the job's collectives -------------------------------------------------------

inline std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Every rank's report, gathered; then the plan of this rank. Every rank must pass the same n_devs
// (E-DIST-007 otherwise).
inline device_plan plan_devices(replicas& job, int n_devs, int visible, std::string host = this_host()) {
  require_same(job, n_devs, "n_devs (devices per process)", "pass the same n_devs to every rank (the same launch line)");
  std::string mine = std::to_string(visible) + ' ' + host;
  std::vector<char> all;
  std::vector<std::size_t> sizes;
  job.gather(mine.data(), mine.size(), all, sizes, "the ranks' devices (host, visible GPUs)");
  std::vector<rank_devices> reports(sizes.size());
  std::size_t at = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::string_view s(all.data() + at, sizes[k]);
    at += sizes[k];
    const std::size_t space = s.find(' ');
    reports[k].visible = std::stoi(std::string(s.substr(0, space)));
    reports[k].host = std::string(s.substr(space + 1));
  }
  return plan_devices(job.rank(), reports, n_devs);
}

// Gathers every rank's chosen devices' UUIDs and applies require_distinct_devices.
inline void require_distinct_devices(replicas& job, std::vector<device_uuid> const& mine, int n_devs, std::string host = this_host()) {
  std::string bytes(mine.size() * 16, '\0');
  for (std::size_t i = 0; i < mine.size(); ++i) std::memcpy(bytes.data() + 16 * i, mine[i].data(), 16);
  bytes += host;
  std::vector<char> all;
  std::vector<std::size_t> sizes;
  job.gather(bytes.data(), bytes.size(), all, sizes, "the ranks' GPU UUIDs");
  std::vector<std::vector<device_uuid>> uuids(sizes.size());
  std::vector<std::string> hosts(sizes.size());
  std::size_t at = 0;
  const std::size_t n = n_devs > 0 ? static_cast<std::size_t>(n_devs) : 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] < 16 * n)  // a rank reported fewer devices than n_devs: never read past its report
      throw error("E-DIST-007",
                  "rank " + std::to_string(k) + " reported " + std::to_string(sizes[k] / 16) + " GPU UUIDs, not n_devs = " + std::to_string(n_devs),
                  "pass every rank the same n_devs and one UUID for each of its devices");
    uuids[k].resize(n);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(uuids[k][i].data(), all.data() + at + 16 * i, 16);
    hosts[k].assign(all.data() + at + 16 * n, sizes[k] - 16 * n);
    at += sizes[k];
  }
  require_distinct_devices(uuids, hosts, n_devs);
}

}  // namespace nitro::dist
