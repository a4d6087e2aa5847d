// nitro/dist/shard.hpp — which samples each rank reads: its shard of every global batch.
//
// Training: every rank draws the SAME seeded permutation of the train split for epoch e (the one
// data::loader draws from (seed, e): iota, then nitro::shuffle with rng(fold(seed, e))). Global
// batch k is positions [k B, (k + 1) B) of it, as for one process; rank r of K reads the r-th
// contiguous block of B / K of them. Together the ranks read exactly the global batch, so with
// gradients summed over the ranks and divided by K the step is the one a single process takes on
// the same global batch (mean losses, as every nitro loss is). The batch_size keyword stays the
// GLOBAL batch: `mpirun -np 4` trains the same run as one process, four times faster.
//
//   nitro::dist::shard_loader<Batch> ld(split, {global_batch, true, true, 2, fold(seed, 2)}, rank, size);
//   ld.start_epoch(epoch);                 // or start_epoch(epoch, first_batch) to resume
//   while (auto b = ld.next()) ...         // b holds global_batch / size samples
//
// Evaluation: rank r reads the r-th contiguous block of whole batches of the split (split_shard,
// no copy), so its samples, concatenated in rank order, are the split in order (metrics' => concat
// rule), and its batches are one process's batches (a mean over batches reduces to one process's).
//
// Needs no MPI header. E-DIST-001 when the global batch does not divide over the ranks.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/data/dataset.hpp"
#include "nitro/data/loader.hpp"

#include <boost/hana/at_key.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>

#include <algorithm>    // min
#include <cstdint>      // int64_t
#include <string>       // messages
#include <type_traits>  // remove_cvref_t

namespace nitro::dist {

// A contiguous block [first, first + count) of n items: rank's share of K.
struct shard {
  std::int64_t first = 0, count = 0;
};
constexpr shard shard_of(std::int64_t n, int rank, int size) noexcept {
  const std::int64_t a = n * rank / size, b = n * (rank + 1) / size;
  return {a, b - a};
}

// The global batch must split evenly: every rank trains on the same number of samples, so the
// mean of the ranks' mean gradients is the mean gradient of the global batch.
NITRO_RUNTIME_INLINE void check_global_batch(std::int64_t global_batch, int size);

namespace detail {
// E-DIST-002: a split too small to give every rank a sample.
[[noreturn]] NITRO_RUNTIME_INLINE void fewer_samples_than_ranks(std::string const& split, std::int64_t samples, int size);

// Samples [first, first + count) of a split, viewing its memory.
template <class Batch>
data::in_memory_split<Batch> split_view(data::in_memory_split<Batch> const& split, std::int64_t first, std::int64_t count) {
  Batch part;
  boost::hana::for_each(boost::hana::keys(split.all()), [&](auto key) {
    auto const& src = boost::hana::at_key(split.all(), key);
    using Field = std::remove_cvref_t<decltype(src)>;
    using S = typename Field::scalar;
    const std::int64_t f = src.rank() <= 1 ? 1 : src.features();
    boost::hana::at_key(part, key) = Field(const_cast<S*>(src.data()) + first * f, src.shape().with_last(count));
  });
  return data::in_memory_split<Batch>(split.name(), part);
}
}  // namespace detail

// Rank's contiguous block of a split, viewing its memory (evaluation). E-DIST-002 when a rank
// would get no sample.
template <class Batch>
data::in_memory_split<Batch> split_shard(data::in_memory_split<Batch> const& split, int rank, int size) {
  if (split.size() < size) detail::fewer_samples_than_ranks(split.name(), split.size(), size);
  const shard s = shard_of(split.size(), rank, size);
  return detail::split_view(split, s.first, s.count);
}

// Rank's contiguous block of WHOLE batches of the split: the batches one process reads with
// `batch` samples each (the last one partial), dealt out in order, so each rank's loader sees
// exactly one process's batches. A per-batch value (the evaluation's "loss", a mean over batches)
// then reduces to one process's value, and the blocks in rank order are still the split in order
// (the => concat rule). With fewer batches than ranks, the blocks of split_shard(split, rank, size).
template <class Batch>
data::in_memory_split<Batch> split_shard(data::in_memory_split<Batch> const& split, int rank, int size, std::int64_t batch) {
  const std::int64_t n = split.size();
  const std::int64_t batches = batch > 0 ? (n + batch - 1) / batch : 0;
  if (batches < size) return split_shard(split, rank, size);
  const shard b = shard_of(batches, rank, size);
  const std::int64_t first = b.first * batch, end = std::min(n, (b.first + b.count) * batch);
  return detail::split_view(split, first, end - first);
}

// Rank's shard of every global batch of a seeded per-epoch permutation: data::loader reading block
// `rank` of `size` of each batch (loader_options::part/parts), so the permutation, the batches and
// the background gathering are one process's loader's. A batch stays valid until the next call to
// next(). E-DIST-001 when the global batch does not split evenly.
template <class Batch>
class shard_loader : public data::loader<Batch> {
 public:
  // `global`: the options one process would use (batch_size is the global batch).
  shard_loader(data::in_memory_split<Batch> const& split, data::loader_options global, int rank, int size)
      : data::loader<Batch>(split, sharded(global, rank, size)), m_rank(rank), m_size(size) {}

  std::int64_t local_batch() const noexcept { return this->options().batch_size / m_size; }
  // This rank's columns of global batch k (of the batch's samples; the last may be short without drop_last).
  shard columns(std::int64_t k) const noexcept {
    const data::batch_block c = data::loader<Batch>::columns(k);
    return {c.first, c.count};
  }
  int rank() const noexcept { return m_rank; }
  int size() const noexcept { return m_size; }

 private:
  static data::loader_options sharded(data::loader_options o, int rank, int size) {
    if (o.batch_size <= 0)
      throw error("E-DATA-006", "batch size " + std::to_string(o.batch_size) + " is not positive", "use a batch size of at least 1");
    check_global_batch(o.batch_size, size);
    o.part = rank;
    o.parts = size;
    return o;
  }
  int m_rank, m_size;
};

}  // namespace nitro::dist

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::dist {

NITRO_RUNTIME_INLINE void check_global_batch(std::int64_t global_batch, int size) {
  if (size < 1 || global_batch % size != 0 || global_batch < size)
    throw error("E-DIST-001",
                "the global batch of " + std::to_string(global_batch) + " samples does not split evenly over " + std::to_string(size) +
                    " ranks",
                "use a batch_size that is a multiple of the number of ranks (" + std::to_string(size) + "), or launch a number of ranks that divides " +
                    std::to_string(global_batch));
}

NITRO_RUNTIME_INLINE void detail::fewer_samples_than_ranks(std::string const& split, std::int64_t samples, int size) {
  throw error("E-DIST-002",
              "split '" + split + "' has " + std::to_string(samples) + " samples, fewer than the " + std::to_string(size) +
                  " ranks that share it",
              "evaluate a larger split, or launch fewer ranks");
}

}  // namespace nitro::dist
#endif  // !NITRO_RUNTIME_EXTERN
