// nitro/dist/gradients.hpp — keeping the ranks' copies of the model identical.
//
//   nitro::dist::gradient_reducer red(replicas, h.param_buffer());   // at setup (labels, requests)
//   ... forward, loss, backward on this rank's shard (accumulated over accum micro-batches) ...
//   const float k = red.reduce();                 // ONE sum per parameter group, then wait
//   optimizer.update(k / accum);                  // k = 1 / size: the mean over the global batch
//
// Each parameter group is one contiguous span of the flat gradient buffer (optim/param_store.hpp),
// so a group is one collective — never one per array. start(g) begins group g's sum without
// blocking; the trainer calls it as soon as g's gradients are complete and finish() waits for all.
// The gradients are SUMMED, and the update's gradient scale carries the 1 / size (the optimizer
// already scales by 1 / accum): no extra pass over the buffer. Clipping by the global norm then sees
// the global batch's gradient, as in one process.
//
// Overlap with the backward pass: a group's gradients are complete when the last tape node that
// writes into its span has run. The tape (tensor/tape.hpp) runs opaque closures and offers no
// callback between nodes, so today the sums start right after backward, all groups in flight at
// once, the last group (completed first by backward) first. docs/mpi.md ("Overlap") says what seam
// in the tape (a per-group "complete" callback) would let the same start(g) calls overlap backward.
//
//   step_control      one tiny sum per step: the global batch's loss and "some rank asks to stop",
//                     so every rank takes the same decision (divergence, stop) at the same step
//   average(...)      a buffer averaged over the ranks (running statistics of the state)
//   broadcast_store / broadcast_entries / broadcast_value   rank 0's buffers to every rank (resume)
//   require_identical every rank holds the same bytes (E-DIST-007)
#pragma once

#include "nitro/dist/replicas.hpp"
#include "nitro/optim/param_store.hpp"

#include <array>        // requests and labels per group
#include <cstdint>      // int64_t
#include <string>       // labels
#include <type_traits>  // trivially copyable
#include <variant>      // optimizer state entries

namespace nitro::dist {

template <class Store>
class gradient_reducer {
 public:
  static constexpr std::size_t group_count = Store::group_count;

  gradient_reducer(replicas& r, Store& store) : m_r(&r), m_store(&store) {
    for (std::size_t g = 0; g < group_count; ++g) {
      if constexpr (Store::layout::grouped) m_labels[g] = "the gradient all-reduce of group '" + std::string(Store::layout::group_names[g]) + "'";
      else m_labels[g] = "the gradient all-reduce";
    }
    m_started.fill(false);
    m_requests.fill(-1);
    r.reserve_requests(group_count + 2);
  }
  gradient_reducer(gradient_reducer const&) = delete;
  gradient_reducer& operator=(gradient_reducer const&) = delete;

  // Starts the sum of group g's span (its gradients are complete on this rank). Once per step.
  void start(std::size_t g) {
    if (m_started[g]) return;
    m_started[g] = true;
    group_span const& s = Store::groups[g];
    if (s.size == 0 || m_r->size() == 1) return;
    m_requests[g] = m_r->start_sum(m_store->grads() + s.offset, s.size, m_labels[g]);
  }
  // Starts every group not started yet, the last first (backward completes the last layers first).
  void start_all() {
    for (std::size_t g = group_count; g-- > 0;) start(g);
  }
  // Waits for every group's sum. Returns the factor the optimizer multiplies the summed gradient
  // by for the mean over the ranks: 1 / size.
  float finish() {
    start_all();
    for (std::size_t g = group_count; g-- > 0;) {
      if (m_requests[g] >= 0) m_r->wait(m_requests[g]);
      m_requests[g] = -1;
      m_started[g] = false;
    }
    return 1.0f / static_cast<float>(m_r->size());
  }
  float reduce() { return finish(); }

  std::string_view label(std::size_t g) const noexcept { return m_labels[g]; }
  static constexpr std::size_t collectives_per_step() noexcept {
    std::size_t n = 0;
    for (auto const& s : Store::groups) n += s.size > 0;
    return n;
  }

 private:
  replicas* m_r;
  Store* m_store;
  std::array<std::string, group_count> m_labels;
  std::array<replicas::request, group_count> m_requests{};
  std::array<bool, group_count> m_started{};
};

// The per-step agreement: every rank contributes its loss (the mean over its shard) and whether it
// wants to stop (Ctrl-C, SIGTERM from the launcher, an early stop of its own); every rank receives
// the global batch's loss (the mean over the ranks: shards are equal) and the OR of the stops. A
// NaN on one rank is a NaN everywhere, so divergence ends every rank at the same step.
class step_control {
 public:
  explicit step_control(replicas& r) : m_r(&r) {}
  void start(double loss, bool stop) {
    m_word[0] = loss;
    m_word[1] = stop ? 1.0 : 0.0;
    m_request = m_r->start_sum(m_word, 2, "the per-step agreement (loss, stop)");
  }
  void finish() {
    if (m_request >= 0) m_r->wait(m_request);
    m_request = -1;
  }
  double loss() const noexcept { return m_word[0] / static_cast<double>(m_r->size()); }
  bool stop() const noexcept { return m_word[1] > 0; }

 private:
  replicas* m_r;
  double m_word[2] = {0, 0};
  replicas::request m_request = -1;
};

// A float buffer averaged over the ranks, in place (the state's running statistics).
inline void average(replicas& r, float* data, std::int64_t n, std::string_view what) {
  if (r.size() == 1 || n == 0) return;
  r.sum(data, n, what);
  const float k = 1.0f / static_cast<float>(r.size());
  for (std::int64_t i = 0; i < n; ++i) data[i] *= k;
}
template <class Store>
void average_store(replicas& r, Store& s, std::string_view what) {
  average(r, s.values(), Store::size, what);
}

// Rank 0's copy to every rank.
template <class T>
void broadcast_value(replicas& r, T& v, std::string_view what) {
  static_assert(std::is_trivially_copyable_v<T>, "nitro::dist::broadcast_value: T must be trivially copyable");
  r.broadcast(&v, sizeof(T), what);
}
template <class Store>
void broadcast_store(replicas& r, Store& s, std::string_view what) {
  r.broadcast(s.values(), sizeof(*s.values()) * static_cast<std::size_t>(Store::size), what);
}
// Named flat tensors viewing their owner's memory (the optimizer program's state_tensors()).
template <class Entries>
void broadcast_entries(replicas& r, Entries const& entries, std::string_view what) {
  for (auto const& e : entries)
    std::visit([&](auto const& t) { r.broadcast(const_cast<void*>(static_cast<void const*>(t.data())), sizeof(*t.data()) * static_cast<std::size_t>(t.numel()), what); },
               e.value);
}

// Every rank holds the same values (E-DIST-007 naming `what` otherwise).
template <class Store>
void require_identical(replicas& r, Store const& s, std::string_view what) {
  require_same(r, checksum(s.values(), sizeof(*s.values()) * static_cast<std::size_t>(Store::size)), what,
               "every rank must start from the same weights: broadcast rank 0's (nitro::dist::broadcast_store) after building or resuming");
}

}  // namespace nitro::dist
