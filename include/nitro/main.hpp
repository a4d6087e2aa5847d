// nitro/main.hpp — nitro::main<Programs...>(argc, argv): a trainer binary's whole command line.
//
//   #include <nitro/main.hpp>
//   int main(int argc, char** argv) { return nitro::main<FashionMLP<256>, FashionMLP<128>>(argc, argv); }
//
// The same line serves one process and a data-parallel job: built with MPI (NITRO_WITH_MPI, which
// the CMake target nitro::mpi sets) and started by a launcher (mpirun, srun --mpi=pmix), nitro::main
// opens the MPI session itself, passes its job to the command line (every handle it builds is a
// replica of the job: the `replicas` construction fact), and ends the job as
// dist/session.hpp says (a failing rank ends every rank, never a hang). Run on its own, or built
// without MPI, it is the one-process command line (cli/main.hpp) and never initialises MPI.
//
// Apart from nitro/nitro.hpp, so a trainer with its own main (the handle alone) does not compile
// the command line.
#pragma once

#include "nitro/nitro.hpp"
// A trainer nvcc compiles with the nitro::cuda target (its kernel headers on the include path) has
// the CUDA backend: --set device=cuda trains its programs there (cli/main.hpp, with_point).
#if defined(__CUDACC__) && __has_include(<nitro/kernels/backend.cuh>)
#include "nitro/cuda.cuh"
#endif
#include "nitro/cli/main.hpp"

#ifdef NITRO_WITH_MPI
#include "nitro/dist.hpp"

#include <exception>  // a failure on one rank ends every rank
#endif

namespace nitro {

template <class... Programs>
int main(int argc, char** argv) {
#ifdef NITRO_WITH_MPI
  if (dist::launched_by_mpi()) {
    dist::session mpi(argc, argv);  // MPI once; a failing rank ends the job
    // a rank waiting in a collective also sees the stop the command line's own signal handler records
    mpi.world().options().stop_requested = [] { return dist::stop_signal_received() || cli::stop_requested(); };
    int code = 1;
    try {
      code = cli::main<Programs...>(argc, argv, &mpi.world());  // every handle is one replica; rank 0 writes the record
    } catch (std::exception const& e) {
      return mpi.finish(1, e.what());
    }
    return mpi.finish(code);
  }
#endif
  return cli::main<Programs...>(argc, argv);
}

}  // namespace nitro
