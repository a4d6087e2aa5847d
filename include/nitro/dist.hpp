// nitro/dist.hpp — data-parallel training across processes and hosts over MPI.
//
// Not part of <nitro/nitro.hpp>: it needs MPI's headers (Open MPI: libopenmpi-dev; link
// MPI::MPI_CXX from CMake's find_package(MPI)). A program launched with `mpirun -np K` makes one
// session and hands its world() — a nitro::dist::replicas — to the trainer:
//
//   #include <nitro/nitro.hpp>
//   #include <nitro/dist.hpp>
//   int main(int argc, char** argv) {
//     nitro::dist::session mpi(argc, argv);
//     ...                                       // each rank trains on its shard; gradients summed per group
//     return mpi.finish(0);
//   }
//
// The pieces (docs/mpi.md says how to launch and how the handle uses them):
//   dist/session.hpp       MPI_Init/MPI_Finalize once per process; a failing rank ends the job
//   dist/communicator.hpp  rank, size, barrier and collectives with deadlines (no hang on a dead rank)
//   dist/replicas.hpp      the MPI-free view the trainer holds; single_process; writes() = rank 0
//   dist/shard.hpp         each rank's shard of every epoch's permutation; evaluation shards
//   dist/gradients.hpp     one sum per parameter group; the per-step agreement; broadcasts for resume
//   dist/metrics.hpp       a split's metrics over every rank by the pair rules
//   the handle's seam: the construction fact nitro::kw::replicas = &mpi.world() makes a handle one replica
// GPUs across hosts: dist/cuda/data_parallel.cuh bootstraps one NCCL communicator through MPI (docs/mpi.md).
#pragma once

#include "nitro/dist/communicator.hpp"
#include "nitro/dist/gradients.hpp"
#include "nitro/dist/metrics.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/dist/session.hpp"
#include "nitro/dist/shard.hpp"
