// nitro/dist/data_parallel.hpp — the seam through which the handle trains data-parallel.
//
//   nitro::dist::session mpi(argc, argv);                // dist/session.hpp (needs <mpi.h>)
//   nitro::dist::data_parallel over(mpi.world());        // every handle built while it lives ...
//   nitro::Nitro h(e, ...);                              // ... is one replica of the run
//   h.train();                                           // each rank its shard; gradients reduced
//
// While a data_parallel scope lives, a nitro::Nitro built in this process is one replica of a job
// of size() ranks (a job of one rank is exactly one process: nothing changes). The handle consults
// its replicas at three places, and nowhere else:
//   (a) after the last micro-batch's backward, before optimizer().update(): the gradients are
//       summed over the ranks (dist::gradient_reducer, one collective per parameter group) and the
//       update's scale carries 1 / size; then the per-step agreement (dist::step_control) gives
//       every rank the global batch's loss and the OR of the stop requests, so divergence, early
//       stopping and a stop asked with a signal end every rank at the same step;
//   (b) the training loader is dist::shard_loader: batch_size is the GLOBAL batch, rank r reads
//       the r-th block of batch_size / size samples of every global batch of the epoch's
//       permutation (E-DIST-001 when it does not divide);
//   (c) evaluation reads the rank's block of the split (dist::split_shard) and reduces the metrics
//       over the ranks by the pair rules (dist::metric_totals); only rank 0 (replicas::writes())
//       writes the run directory — loggers, checkpoints, the binding report — and every rank
//       starts from rank 0's parameters, state and optimizer state (after weights or resume).
// Without a scope (the default, and every build without MPI) the handle is what it was: the
// pointer it keeps is null and no collective is ever made.
//
// Needs no MPI header: replicas is an interface (dist/communicator.hpp implements it over MPI).
#pragma once

#include "nitro/dist/replicas.hpp"

namespace nitro::dist {

namespace detail {
inline replicas*& active_replicas_slot() noexcept {
  static replicas* r = nullptr;
  return r;
}
}  // namespace detail

// The replicas handles built now are part of (null: one process).
inline replicas* active_replicas() noexcept { return detail::active_replicas_slot(); }

// Makes `r` the process's replicas for its lifetime; the previous one comes back at its end.
class data_parallel {
 public:
  explicit data_parallel(replicas& r) noexcept : m_previous(detail::active_replicas_slot()) { detail::active_replicas_slot() = &r; }
  ~data_parallel() { detail::active_replicas_slot() = m_previous; }
  data_parallel(data_parallel const&) = delete;
  data_parallel& operator=(data_parallel const&) = delete;

 private:
  replicas* m_previous;
};

}  // namespace nitro::dist
