// nitro/dist/replicas.hpp — the other processes training the same model: what a trainer asks of them.
//
// Data-parallel training runs K copies of one program (ranks 0..K-1, one per process, on one host
// or many). Each rank trains on its shard of every global batch; after backward the ranks sum
// their gradients (one collective per parameter group), so every rank applies the same update and
// the copies stay identical. `replicas` is that group of processes as the trainer sees it: rank,
// size, "only rank 0 writes", and a handful of collectives. It needs no MPI header:
//   nitro::dist::single_process   size 1, every collective is the identity (a run without mpirun)
//   nitro::dist::mpi_replicas     over MPI (nitro/dist/mpi_replicas.hpp, #include <nitro/dist.hpp>)
// so the handle (train/handle_state.hpp) can hold a `replicas*` without including MPI; it is given one
// as the construction fact `nitro::kw::replicas = &job` (nitro::main passes the MPI job's).
//
// Where this room sits: experiment -> binding -> program -> **dist** -> trainer -> records. It reads
// the optimizer program's layout (param_store's groups are contiguous spans of the flat buffers,
// optim/param_store.hpp), which it must know to reduce one span per group; the trainer calls it
// between backward and the optimizer's update, and consults `writes()` before writing records.
// Nothing upstream includes it.
//
// Every collective names what it is doing (`what`, a string that outlives the call) and the step
// (set_step), so a failure says "the gradient all-reduce of group 'head' at step 12". Collectives
// over MPI have a deadline (a dead or stuck rank fails the run with E-DIST-003/005, never a hang):
// see nitro/dist/communicator.hpp. No collective allocates on the heap except gather()'s result
// vectors, which keep their capacity between calls.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"

#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <cstring>      // memcpy
#include <string>       // broadcast_string
#include <string_view>  // labels
#include <vector>       // gather results

namespace nitro::dist {

class replicas {
 public:
  virtual ~replicas() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Only rank 0 writes the run directory: manifest, status, metrics, checkpoints. Every logger and
  // the checkpointer consult this predicate.
  bool writes() const noexcept { return rank() == 0; }
  // What the records say of the job (the `replicas` construction fact's value): "4 ranks".
  std::string describe() const { return std::to_string(size()) + (size() == 1 ? " rank" : " ranks"); }

  // The optimizer step the next collectives belong to (for messages).
  void set_step(std::int64_t step) noexcept { m_step = step; }
  std::int64_t step() const noexcept { return m_step; }

  // ---- non-blocking sums, in place --------------------------------------------------------------
  // start_sum returns a request; the buffer must not be read or written until wait(request).
  // Requests complete in any order; wait_all() completes every open one.
  using request = int;
  virtual request start_sum(float* data, std::int64_t n, std::string_view what) = 0;
  virtual request start_sum(double* data, std::int64_t n, std::string_view what) = 0;
  virtual void wait(request r) = 0;
  virtual void wait_all() = 0;
  // Room for n open requests (made at setup, so that no step allocates).
  virtual void reserve_requests(std::size_t n) = 0;
  // Lets started sums advance without waiting for them (MPI moves a non-blocking collective on only
  // inside an MPI call): the gradient reducer calls it between backward nodes. Never blocks, never throws.
  virtual void progress() noexcept {}

  // ---- blocking collectives -----------------------------------------------------------------------
  void sum(float* data, std::int64_t n, std::string_view what) { wait(start_sum(data, n, what)); }
  void sum(double* data, std::int64_t n, std::string_view what) { wait(start_sum(data, n, what)); }
  // Element-wise maximum over the ranks, in place.
  virtual void max(std::int64_t* data, std::int64_t n, std::string_view what) = 0;
  // Rank 0's bytes to every rank.
  virtual void broadcast(void* data, std::size_t bytes, std::string_view what) = 0;
  // Every rank's bytes to every rank, in rank order: `all` holds them back to back, sizes[r] is
  // rank r's count.
  virtual void gather(void const* mine, std::size_t bytes, std::vector<char>& all, std::vector<std::size_t>& sizes,
                      std::string_view what) = 0;
  virtual void barrier(std::string_view what) = 0;

  // ---- while waiting on something else (a GPU stream, an NCCL communicator) -----------------------
  // Throws what a collective would throw now: another rank's failure notice (E-DIST-005), a stop
  // request that outlived its grace, an earlier failure. Cheap enough to call every few milliseconds.
  virtual void check_peers(std::string_view /*what*/) {}
  // How long a rank waits for the others (the collectives' deadline; NITRO_DIST_TIMEOUT).
  virtual double timeout_seconds() const noexcept { return 600; }

 private:
  std::int64_t m_step = 0;
};

// One process: rank 0 of 1. Every collective leaves the data as it is.
class single_process final : public replicas {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  request start_sum(float*, std::int64_t, std::string_view) override { return 0; }
  request start_sum(double*, std::int64_t, std::string_view) override { return 0; }
  void wait(request) override {}
  void wait_all() override {}
  void reserve_requests(std::size_t) override {}
  void max(std::int64_t*, std::int64_t, std::string_view) override {}
  void broadcast(void*, std::size_t, std::string_view) override {}
  void gather(void const* mine, std::size_t bytes, std::vector<char>& all, std::vector<std::size_t>& sizes, std::string_view) override {
    all.resize(bytes);
    if (bytes) std::memcpy(all.data(), mine, bytes);
    sizes.assign(1, bytes);
  }
  void barrier(std::string_view) override {}
};

// ---- small agreements built on the collectives ---------------------------------------------------

// Rank 0's string on every rank (the run's id, the checkpoint chosen for a resume, ...).
inline void broadcast_string(replicas& r, std::string& s, std::string_view what) {
  std::int64_t n = static_cast<std::int64_t>(s.size());
  r.broadcast(&n, sizeof n, what);
  s.resize(static_cast<std::size_t>(n));
  if (n > 0) r.broadcast(s.data(), s.size(), what);
}

// The smallest and largest of a value over the ranks.
struct spread {
  std::int64_t min = 0, max = 0;
  bool same() const noexcept { return min == max; }
};
inline spread spread_of(replicas& r, std::int64_t v, std::string_view what) {
  std::int64_t m[2] = {v, ~v};  // ~ reverses the order: max(~v) = ~min(v)
  r.max(m, 2, what);
  return {~m[1], m[0]};
}

// Every rank must hold the same value (a seed, a layout, a checksum); E-DIST-007 when they do not.
NITRO_RUNTIME_INLINE void require_same(replicas& r, std::int64_t v, std::string_view what, std::string_view fix);

// What every rank must agree on before the first step, or the ranks would not be copies of one
// run: the seed (the epochs' permutation, every random stream), the global batch, accum, the
// parameters' layout and the data. E-DIST-007 names the first that differs.
struct run_fingerprint {
  std::uint64_t seed = 0;
  std::int64_t global_batch = 0;
  std::int64_t accum = 1;
  std::int64_t parameters = 0;     // elements of the flat parameter buffer (the program's layout)
  std::int64_t train_samples = 0;  // samples of the train split
};
inline void require_same_run(replicas& r, run_fingerprint const& f) {
  constexpr char const* fix = "launch the same binary with the same selection (--set, --variant, seed) and the same data on every rank";
  require_same(r, static_cast<std::int64_t>(f.seed), "the seed", fix);
  require_same(r, f.global_batch, "the batch size", fix);
  require_same(r, f.accum, "accum", fix);
  require_same(r, f.parameters, "the number of parameters (the compiled program)", fix);
  require_same(r, f.train_samples, "the number of training samples", fix);
}

// FNV-1a over bytes: a checksum for require_same (identical parameters on every rank).
inline std::int64_t checksum(void const* data, std::size_t bytes, std::uint64_t h = 0xcbf29ce484222325ULL) noexcept {
  auto const* p = static_cast<unsigned char const*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return static_cast<std::int64_t>(h);
}

}  // namespace nitro::dist

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::dist {

NITRO_RUNTIME_INLINE void require_same(replicas& r, std::int64_t v, std::string_view what, std::string_view fix) {
  const spread s = spread_of(r, v, what);
  if (!s.same())
    throw error("E-DIST-007",
                "the " + std::to_string(r.size()) + " ranks disagree on " + std::string(what) + " (values from " + std::to_string(s.min) +
                    " to " + std::to_string(s.max) + "; this rank, " + std::to_string(r.rank()) + ", has " + std::to_string(v) + ")",
                std::string(fix));
}

}  // namespace nitro::dist
#endif  // !NITRO_RUNTIME_EXTERN
