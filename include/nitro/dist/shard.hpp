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

#include "nitro/core/error.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/io/dataset.hpp"
#include "nitro/io/loader.hpp"

#include <boost/hana/at_key.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>

#include <algorithm>           // min
#include <condition_variable>  // hand-off between worker and consumer
#include <cstdint>             // int64_t
#include <exception>           // a worker's error reaches the consumer
#include <mutex>               // the ring's lock
#include <numeric>             // iota
#include <optional>            // next()
#include <string>              // messages
#include <thread>              // the worker
#include <vector>              // ring, order

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
inline void check_global_batch(std::int64_t global_batch, int size) {
  if (size < 1 || global_batch % size != 0 || global_batch < size)
    throw error("E-DIST-001",
                "the global batch of " + std::to_string(global_batch) + " samples does not split evenly over " + std::to_string(size) +
                    " ranks",
                "use a batch_size that is a multiple of the number of ranks (" + std::to_string(size) + "), or launch a number of ranks that divides " +
                    std::to_string(global_batch));
}

namespace detail {
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
  if (split.size() < size)
    throw error("E-DIST-002",
                "split '" + split.name() + "' has " + std::to_string(split.size()) + " samples, fewer than the " + std::to_string(size) +
                    " ranks that share it",
                "evaluate a larger split, or launch fewer ranks");
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

// Rank's shard of every global batch of a seeded per-epoch permutation, gathered on a background
// thread into a ring of buffers allocated once (the protocol of data::loader). A batch stays valid
// until the next call to next().
template <class Batch>
class shard_loader {
 public:
  // `global`: the options one process would use (batch_size is the global batch).
  shard_loader(data::in_memory_split<Batch> const& split, data::loader_options global, int rank, int size)
      : m_split(&split), m_opt(global), m_rank(rank), m_size(size) {
    if (global.batch_size <= 0)
      throw error("E-DATA-006", "batch size " + std::to_string(global.batch_size) + " is not positive", "use a batch size of at least 1");
    check_global_batch(global.batch_size, size);
    if (m_opt.prefetch < 0) m_opt.prefetch = 0;
    const std::size_t slots = static_cast<std::size_t>(m_opt.prefetch) + 1;
    for (std::size_t i = 0; i < slots; ++i) m_slots.push_back({split.make_buffers(local_batch()), {}, false});
    m_order.resize(static_cast<std::size_t>(split.size()));
    m_worker = std::thread([this] { work(); });
  }
  shard_loader(shard_loader const&) = delete;
  shard_loader& operator=(shard_loader const&) = delete;
  ~shard_loader() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_worker.join();
  }

  // Global batches per epoch: the same on every rank, and the same as one process's loader.
  std::int64_t batches_per_epoch() const noexcept {
    const std::int64_t n = m_split->size(), b = m_opt.batch_size;
    return m_opt.drop_last ? n / b : (n + b - 1) / b;
  }
  std::int64_t local_batch() const noexcept { return m_opt.batch_size / m_size; }
  // This rank's columns of global batch k (of `samples` samples; the last may be short without drop_last).
  shard columns(std::int64_t k) const noexcept {
    const std::int64_t samples = std::min(m_opt.batch_size, m_split->size() - k * m_opt.batch_size);
    return shard_of(samples, m_rank, m_size);
  }
  data::loader_options const& options() const noexcept { return m_opt; }
  int rank() const noexcept { return m_rank; }
  int size() const noexcept { return m_size; }

  // Begins epoch `epoch` at global batch `first` (an exact resume starts mid-epoch).
  void start_epoch(std::uint64_t epoch, std::int64_t first = 0) {
    std::unique_lock<std::mutex> lock(m_mutex);
    ++m_generation;
    m_epoch = epoch;
    m_next_fill = first;
    m_next_take = first;
    m_end = batches_per_epoch();
    for (auto& s : m_slots) s.ready = false;
    m_held = false;
    m_fill_slot = 0;
    m_take_slot = 0;
    m_error = nullptr;
    m_order_ready = false;
    lock.unlock();
    m_cv.notify_all();
  }

  // This rank's shard of the next global batch, or nothing at the epoch's end.
  std::optional<Batch> next() {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (m_next_take >= m_end) return std::nullopt;
    slot& s = m_slots[m_take_slot];
    if (m_held) {
      m_held = false;
      m_cv.notify_all();
    }
    m_cv.wait(lock, [&] { return s.ready || m_error; });
    if (m_error) std::rethrow_exception(m_error);
    Batch b = s.view;
    s.ready = false;
    m_held = true;
    m_take_slot = (m_take_slot + 1) % m_slots.size();
    ++m_next_take;
    m_cv.notify_all();
    return b;
  }

 private:
  struct slot { Batch buffers; Batch view; bool ready; };

  void work() {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (true) {
      m_cv.wait(lock, [&] { return m_stop || can_fill(); });
      if (m_stop) return;
      const std::uint64_t gen = m_generation;
      if (!m_order_ready) {
        const std::uint64_t epoch = m_epoch;
        lock.unlock();
        build_order(epoch);
        lock.lock();
        if (gen != m_generation) continue;
        m_order_ready = true;
      }
      const std::size_t at = m_fill_slot;
      const std::int64_t k = m_next_fill;
      lock.unlock();
      std::exception_ptr err;
      Batch view;
      try {
        const shard c = columns(k);
        view = m_split->gather(m_order.data() + k * m_opt.batch_size + c.first, c.count, m_slots[at].buffers);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (gen != m_generation) continue;
      if (err) { m_error = err; m_cv.notify_all(); continue; }
      m_slots[at].view = view;
      m_slots[at].ready = true;
      m_fill_slot = (m_fill_slot + 1) % m_slots.size();
      ++m_next_fill;
      m_cv.notify_all();
    }
  }
  bool can_fill() const {
    if (m_next_fill >= m_end || m_error) return false;
    const std::int64_t in_use = (m_next_fill - m_next_take) + (m_held ? 1 : 0);
    if (in_use >= static_cast<std::int64_t>(m_slots.size())) return false;
    return !m_slots[m_fill_slot].ready;
  }
  // The permutation data::loader draws for this epoch, on every rank.
  void build_order(std::uint64_t epoch) {
    std::iota(m_order.begin(), m_order.end(), std::int64_t{0});
    if (m_opt.shuffle) {
      rng g(fold(m_opt.seed, epoch));
      shuffle(m_order.begin(), m_order.end(), g);
    }
  }

  data::in_memory_split<Batch> const* m_split;
  data::loader_options m_opt;
  int m_rank, m_size;
  std::vector<slot> m_slots;
  std::vector<std::int64_t> m_order;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::thread m_worker;
  bool m_stop = false;
  bool m_order_ready = false;
  bool m_held = false;
  std::uint64_t m_generation = 0;
  std::uint64_t m_epoch = 0;
  std::int64_t m_next_fill = 0, m_next_take = 0, m_end = 0;
  std::size_t m_fill_slot = 0, m_take_slot = 0;
  std::exception_ptr m_error;
};

}  // namespace nitro::dist
