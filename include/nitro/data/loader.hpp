// nitro/data/loader.hpp — batches of a split, gathered on a background thread while the step runs.
//
// Each epoch's order is a permutation drawn from (seed, epoch) alone, so epoch e is the same
// whether or not the run was interrupted before it, and a resume can start at any batch of it.
// A ring of `prefetch + 1` batch buffers is allocated once; the worker fills buffers ahead of the
// consumer, which receives views into them. A batch stays valid until the next call to next().
// With loader_options::parts > 1 it reads one block of columns of every batch (a data-parallel
// rank's shard, dist::shard_loader); the batches and their order stay one process's.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/data/dataset.hpp"

#include <algorithm>           // min
#include <condition_variable>  // hand-off between worker and consumer
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

// Columns [first, first + count) of a batch.
struct batch_block {
  std::int64_t first = 0, count = 0;
};

template <class Batch>
class loader {
 public:
  loader(in_memory_split<Batch> const& split, loader_options opt) : m_split(&split), m_opt(opt) {
    if (opt.batch_size <= 0)
      throw error("E-DATA-006", "batch size " + std::to_string(opt.batch_size) + " is not positive", "use a batch size of at least 1");
    if (opt.parts < 1 || opt.part < 0 || opt.part >= opt.parts)
      throw error("E-DATA-009", "loader part " + std::to_string(opt.part) + " of " + std::to_string(opt.parts) + " does not exist",
                  "read part 0 .. parts-1 of parts >= 1 (part 0 of 1: the whole batch)");
    if (opt.prefetch < 0) m_opt.prefetch = 0;
    const std::size_t slots = static_cast<std::size_t>(m_opt.prefetch) + 1;
    const std::int64_t widest = (opt.batch_size + opt.parts - 1) / opt.parts;  // the largest block of a batch
    for (std::size_t i = 0; i < slots; ++i) m_slots.push_back({split.make_buffers(widest), {}, 0, false});
    m_order.resize(static_cast<std::size_t>(split.size()));
    m_worker = std::thread([this] { work(); });
  }
  loader(loader const&) = delete;
  loader& operator=(loader const&) = delete;
  ~loader() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_worker.join();
  }

  std::int64_t batches_per_epoch() const noexcept {
    const std::int64_t n = m_split->size(), b = m_opt.batch_size;
    return m_opt.drop_last ? n / b : (n + b - 1) / b;
  }
  std::int64_t samples() const noexcept { return m_split->size(); }
  // This loader's columns of batch k (the last batch may be short without drop_last).
  batch_block columns(std::int64_t k) const noexcept {
    const std::int64_t n = std::min(m_opt.batch_size, m_split->size() - k * m_opt.batch_size);
    const std::int64_t a = n * m_opt.part / m_opt.parts, b = n * (m_opt.part + 1) / m_opt.parts;
    return {a, b - a};
  }
  loader_options const& options() const noexcept { return m_opt; }
  std::string const& split_name() const noexcept { return m_split->name(); }

  // Begins epoch `epoch` at batch `first` (0 for a fresh epoch; later for an exact resume).
  void start_epoch(std::uint64_t epoch, std::int64_t first = 0) {
    std::unique_lock<std::mutex> lock(m_mutex);
    ++m_generation;  // batches of an abandoned epoch are discarded
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

  // The next batch of the epoch, or nothing at its end. Rethrows an error the worker hit.
  std::optional<Batch> next() {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (m_next_take >= m_end) return std::nullopt;
    slot& s = m_slots[m_take_slot];
    if (m_held) {  // the previous batch's buffers are free again
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
  struct slot { Batch buffers; Batch view; std::int64_t batch; bool ready; };

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
        const batch_block c = columns(k);
        view = m_split->gather(m_order.data() + k * m_opt.batch_size + c.first, c.count, m_slots[at].buffers);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (gen != m_generation) continue;
      if (err) { m_error = err; m_cv.notify_all(); continue; }
      m_slots[at].view = view;
      m_slots[at].batch = k;
      m_slots[at].ready = true;
      m_fill_slot = (m_fill_slot + 1) % m_slots.size();
      ++m_next_fill;
      m_cv.notify_all();
    }
  }
  // Slots in use: batches filled and not yet taken, plus the one the consumer holds until its next
  // call to next(). The producer fills while one is free.
  bool can_fill() const {
    if (m_next_fill >= m_end || m_error) return false;
    const std::int64_t in_use = (m_next_fill - m_next_take) + (m_held ? 1 : 0);
    if (in_use >= static_cast<std::int64_t>(m_slots.size())) return false;
    return !m_slots[m_fill_slot].ready;
  }
  void build_order(std::uint64_t epoch) {
    std::iota(m_order.begin(), m_order.end(), std::int64_t{0});
    if (m_opt.shuffle) {
      rng g(fold(m_opt.seed, epoch));
      shuffle(m_order.begin(), m_order.end(), g);
    }
  }

  in_memory_split<Batch> const* m_split;
  loader_options m_opt;
  std::vector<slot> m_slots;
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

}  // namespace nitro::data
