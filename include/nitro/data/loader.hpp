// nitro/data/loader.hpp — batches of a split, gathered on a background thread while the step runs.
//
// Each epoch's order is a permutation drawn from (seed, epoch) alone, so epoch e is the same
// whether or not the run was interrupted before it, and a resume can start at any batch of it.
// A ring of `prefetch + 1` batch buffers is allocated once; the worker fills buffers ahead of the
// consumer, which receives views into them. A batch stays valid until the next call to next().
// With loader_options::parts > 1 it reads one block of columns of every batch (a data-parallel
// rank's shard, dist::shard_loader); the batches and their order stay one process's.
//
// The ring — the worker thread, the permutation, the hand-off between producer and consumer — does
// not depend on the batch type: it is detail::prefetch_ring, compiled once in nitro::runtime where
// that is linked. A loader<Batch> adds only the buffers and the gather of its batch type.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/data/dataset.hpp"

#include <algorithm>           // min
#include <condition_variable>  // hand-off between worker and consumer
#include <cstddef>             // ptrdiff_t
#include <cstdint>             // int64_t
#include <exception>           // exception_ptr: a worker's error reaches the consumer
#include <mutex>               // the ring's lock
#include <numeric>             // iota
#include <optional>            // next()
#include <thread>              // the worker
#include <vector>              // ring, order

namespace nitro::data {

struct loader_options {
  std::int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = true;   // training: every batch full, so shapes (and the arena) never change
  int prefetch = 2;        // batches gathered ahead of the one in use
  std::uint64_t seed = 1;
  // Read only block `part` of `parts` of every batch: columns [n part / parts, n (part + 1) / parts)
  // of a batch of n samples. The ranks of a data-parallel job each read their block of the same
  // batches of the same permutation (dist::shard_loader); one process reads part 0 of 1, the whole.
  int part = 0, parts = 1;
};

// The seed of a run's training order: the run seed's stream 2 (1 initialises the parameters).
// Epoch e's permutation is then Fisher-Yates under rng(fold(train_order_seed(seed), e)); a
// framework fed the same order replays it (bench/lm_torch.py).
constexpr std::uint64_t train_order_seed(std::uint64_t run_seed) noexcept { return fold(run_seed, 2); }

// Columns [first, first + count) of a batch.
struct batch_block {
  std::int64_t first = 0, count = 0;
};

namespace detail {

// The batch-independent half of a loader: a ring of `slots()` buffers filled ahead of the consumer
// by a worker thread, in the order of the epoch's permutation. The worker calls `fill(self, slot,
// indices, count)` to gather a batch into slot `slot`; an exception it throws reaches the consumer.
class prefetch_ring {
 public:
  using fill_fn = void (*)(void* self, std::size_t slot, std::int64_t const* indices, std::int64_t count);

  // E-DATA-006 / E-DATA-009 for bad options; the worker starts with start_worker().
  NITRO_RUNTIME_INLINE prefetch_ring(std::int64_t samples, loader_options opt);
  prefetch_ring(prefetch_ring const&) = delete;
  prefetch_ring& operator=(prefetch_ring const&) = delete;
  ~prefetch_ring() { stop(); }

  std::size_t slots() const noexcept { return static_cast<std::size_t>(m_opt.prefetch) + 1; }
  std::int64_t widest() const noexcept { return (m_opt.batch_size + m_opt.parts - 1) / m_opt.parts; }  // the largest block of a batch
  std::int64_t batches_per_epoch() const noexcept {
    const std::int64_t n = m_samples, b = m_opt.batch_size;
    return m_opt.drop_last ? n / b : (n + b - 1) / b;
  }
  std::int64_t samples() const noexcept { return m_samples; }
  // This loader's columns of batch k (the last batch may be short without drop_last).
  batch_block columns(std::int64_t k) const noexcept {
    const std::int64_t n = std::min(m_opt.batch_size, m_samples - k * m_opt.batch_size);
    const std::int64_t a = n * m_opt.part / m_opt.parts, b = n * (m_opt.part + 1) / m_opt.parts;
    return {a, b - a};
  }
  loader_options const& options() const noexcept { return m_opt; }

  // The worker fills slots through `fill` on `self` until stop(); call once the buffers exist.
  NITRO_RUNTIME_INLINE void start_worker(fill_fn fill, void* self);
  // Ends and joins the worker (idempotent): before the buffers it fills are destroyed.
  NITRO_RUNTIME_INLINE void stop() noexcept;
  // Begins epoch `epoch` at batch `first`; batches of an abandoned epoch are discarded.
  NITRO_RUNTIME_INLINE void start_epoch(std::uint64_t epoch, std::int64_t first);
  // The slot holding the next batch of the epoch (waiting for it), or -1 at its end. The slot
  // stays the consumer's until the next call. Rethrows an error the worker hit.
  NITRO_RUNTIME_INLINE std::ptrdiff_t next();

 private:
  NITRO_RUNTIME_INLINE void work();
  // Slots in use: batches filled and not yet taken, plus the one the consumer holds until its next
  // call to next(). The producer fills while one is free.
  NITRO_RUNTIME_INLINE bool can_fill() const;
  NITRO_RUNTIME_INLINE void build_order(std::uint64_t epoch);

  std::int64_t m_samples;
  loader_options m_opt;
  fill_fn m_fill = nullptr;
  void* m_self = nullptr;
  std::vector<char> m_ready;  // per slot: filled and not yet taken
  std::vector<std::int64_t> m_order;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::thread m_worker;
  bool m_stop = false;
  bool m_order_ready = false;
  bool m_held = false;  // the consumer holds the last batch it was given
  std::uint64_t m_generation = 0;
  std::uint64_t m_epoch = 0;
  std::int64_t m_next_fill = 0, m_next_take = 0, m_end = 0;
  std::size_t m_fill_slot = 0, m_take_slot = 0;
  std::exception_ptr m_error;
};

}  // namespace detail

template <class Batch>
class loader {
 public:
  loader(in_memory_split<Batch> const& split, loader_options opt) : m_split(&split), m_ring(split.size(), opt) {
    for (std::size_t i = 0; i < m_ring.slots(); ++i) m_buffers.push_back(split.make_buffers(m_ring.widest()));
    m_views.resize(m_ring.slots());
    m_ring.start_worker(&fill, this);
  }
  loader(loader const&) = delete;
  loader& operator=(loader const&) = delete;
  ~loader() { m_ring.stop(); }  // the worker ends before the buffers it fills

  std::int64_t batches_per_epoch() const noexcept { return m_ring.batches_per_epoch(); }
  std::int64_t samples() const noexcept { return m_ring.samples(); }
  // This loader's columns of batch k (the last batch may be short without drop_last).
  batch_block columns(std::int64_t k) const noexcept { return m_ring.columns(k); }
  loader_options const& options() const noexcept { return m_ring.options(); }
  std::string const& split_name() const noexcept { return m_split->name(); }

  // Begins epoch `epoch` at batch `first` (0 for a fresh epoch; later for an exact resume).
  void start_epoch(std::uint64_t epoch, std::int64_t first = 0) { m_ring.start_epoch(epoch, first); }

  // The next batch of the epoch, or nothing at its end. Rethrows an error the worker hit.
  std::optional<Batch> next() {
    const std::ptrdiff_t slot = m_ring.next();
    if (slot < 0) return std::nullopt;
    return m_views[static_cast<std::size_t>(slot)];
  }

 private:
  static void fill(void* self, std::size_t slot, std::int64_t const* indices, std::int64_t count) {
    auto& me = *static_cast<loader*>(self);
    me.m_views[slot] = me.m_split->gather(indices, count, me.m_buffers[slot]);
  }

  in_memory_split<Batch> const* m_split;
  std::vector<Batch> m_buffers, m_views;  // per slot: owned buffers, and the views of its last batch
  detail::prefetch_ring m_ring;           // last: its worker starts after the buffers exist
};

}  // namespace nitro::data

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::data::detail {

NITRO_RUNTIME_INLINE prefetch_ring::prefetch_ring(std::int64_t samples, loader_options opt) : m_samples(samples), m_opt(opt) {
  if (opt.batch_size <= 0)
    throw error("E-DATA-006", "batch size " + std::to_string(opt.batch_size) + " is not positive", "use a batch size of at least 1");
  if (opt.parts < 1 || opt.part < 0 || opt.part >= opt.parts)
    throw error("E-DATA-009", "loader part " + std::to_string(opt.part) + " of " + std::to_string(opt.parts) + " does not exist",
                "read part 0 .. parts-1 of parts >= 1 (part 0 of 1: the whole batch)");
  if (opt.prefetch < 0) m_opt.prefetch = 0;
  m_ready.assign(slots(), 0);
  m_order.resize(static_cast<std::size_t>(samples));
}

NITRO_RUNTIME_INLINE void prefetch_ring::start_worker(fill_fn fill, void* self) {
  m_fill = fill;
  m_self = self;
  m_worker = std::thread([this] { work(); });
}

NITRO_RUNTIME_INLINE void prefetch_ring::stop() noexcept {
  if (!m_worker.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  m_worker.join();
}

NITRO_RUNTIME_INLINE void prefetch_ring::start_epoch(std::uint64_t epoch, std::int64_t first) {
  std::unique_lock<std::mutex> lock(m_mutex);
  ++m_generation;  // batches of an abandoned epoch are discarded
  m_epoch = epoch;
  m_next_fill = first;
  m_next_take = first;
  m_end = batches_per_epoch();
  for (auto& r : m_ready) r = 0;
  m_held = false;
  m_fill_slot = 0;
  m_take_slot = 0;
  m_error = nullptr;
  m_order_ready = false;
  lock.unlock();
  m_cv.notify_all();
}

NITRO_RUNTIME_INLINE std::ptrdiff_t prefetch_ring::next() {
  std::unique_lock<std::mutex> lock(m_mutex);
  if (m_next_take >= m_end) return -1;
  const std::size_t at = m_take_slot;
  if (m_held) {  // the previous batch's buffers are free again
    m_held = false;
    m_cv.notify_all();
  }
  m_cv.wait(lock, [&] { return m_ready[at] || m_error; });
  if (m_error) std::rethrow_exception(m_error);
  m_ready[at] = 0;
  m_held = true;
  m_take_slot = (m_take_slot + 1) % m_ready.size();
  ++m_next_take;
  m_cv.notify_all();
  return static_cast<std::ptrdiff_t>(at);
}

NITRO_RUNTIME_INLINE void prefetch_ring::work() {
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
    try {
      const batch_block c = columns(k);
      m_fill(m_self, at, m_order.data() + k * m_opt.batch_size + c.first, c.count);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (gen != m_generation) continue;
    if (err) {
      m_error = err;
      m_cv.notify_all();
      continue;
    }
    m_ready[at] = 1;
    m_fill_slot = (m_fill_slot + 1) % m_ready.size();
    ++m_next_fill;
    m_cv.notify_all();
  }
}

NITRO_RUNTIME_INLINE bool prefetch_ring::can_fill() const {
  if (m_next_fill >= m_end || m_error) return false;
  const std::int64_t in_use = (m_next_fill - m_next_take) + (m_held ? 1 : 0);
  if (in_use >= static_cast<std::int64_t>(m_ready.size())) return false;
  return !m_ready[m_fill_slot];
}

NITRO_RUNTIME_INLINE void prefetch_ring::build_order(std::uint64_t epoch) {
  std::iota(m_order.begin(), m_order.end(), std::int64_t{0});
  if (m_opt.shuffle) {
    rng g(fold(m_opt.seed, epoch));
    shuffle(m_order.begin(), m_order.end(), g);
  }
}

}  // namespace nitro::data::detail
#endif  // !NITRO_RUNTIME_EXTERN
