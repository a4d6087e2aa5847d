// nitro/dist/gradients.hpp — keeping the ranks' copies of the model identical.
//
//   nitro::dist::gradient_reducer red(replicas, h.param_buffer());   // at setup (labels, requests)
//   ... forward, loss, backward on this rank's shard (accumulated over accum micro-batches); the
//   last micro-batch under  tape::observe_scope watch(tape, red.overlap(tape));  starts each
//   group's sum during its backward, right after the group's gradients are complete ...
//   const float k = red.reduce();                 // ONE sum per parameter group, then wait
//   optimizer.update(k / accum);                  // k = 1 / size: the mean over the global batch
//
// Each parameter group is one contiguous span of the flat gradient buffer (optim/param_store.hpp),
// so a group is one collective — never one per array. start(g) begins group g's sum without
// blocking (the observer below calls it as soon as g's gradients are complete); finish() starts
// any group not started yet and waits for all.
// The gradients are SUMMED, and the update's gradient scale carries the 1 / size (the optimizer
// already scales by 1 / accum): no extra pass over the buffer. Clipping by the global norm then sees
// the global batch's gradient, as in one process.
//
// Overlap with the backward pass: a group's gradients are complete once the last backward node
// that writes into its span has run — the lowest-recorded such node, since backward runs the nodes
// in reverse. overlap() arms the reducer for the LAST micro-batch of a step; the trainer gives it to
// that micro-batch's tape (tape::observe_scope), which tells it the node count, each node that ran,
// and each leaf gradient a node asks for (tape::grad). The reducer keeps a schedule — for each group,
// the lowest node that touched it — learned on a step that runs without overlap: the first one, and
// any whose tape differs from the learned one (node count or tape::fingerprint). On later steps it
// starts group g's sum right after that node ran, so the sums of the last layers run while backward
// computes the first ones. The groups start in one fixed order on every rank, G-1 down to 0 (MPI
// needs the ranks' collectives in the same order, whatever each rank's schedule): a group starts
// once its own gradients are complete and every group before it in that order has started. A group
// no node touched is complete before backward. Safety net: a leaf gradient asked for in a group
// whose sum already started (the schedule did not hold) is E-DIST-013, thrown before the node
// writes — never a silently wrong gradient; a leaf gradient handed out while no node runs (a
// closure that would keep the pointer from forward) turns the overlap off for that step. The sums
// are the same sums as without overlap; only their start moves earlier, so the result is bit for
// bit the same. Nothing allocates per step. MPI advances a started sum only inside MPI calls, so
// after each backward node, while sums are in flight, the observer calls replicas::progress() (an
// MPI_Testall on the open requests: microseconds, never blocking).
//
//   step_control      one tiny sum per step: the global batch's loss and "some rank asks to stop",
//                     so every rank takes the same decision (divergence, stop) at the same step
//   average(...)      a buffer averaged over the ranks (running statistics of the state)
//   broadcast_store / broadcast_entries / broadcast_value   rank 0's buffers to every rank (resume)
//   require_identical every rank holds the same bytes (E-DIST-007)
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/tensor/tape.hpp"

#include <array>        // requests and labels per group, the schedule
#include <cstdint>      // int64_t, uintptr_t
#include <cstdlib>      // getenv
#include <functional>   // less: is a pointer in the flat buffer
#include <string>       // labels
#include <type_traits>  // trivially copyable
#include <variant>      // optimizer state entries

namespace nitro::dist {

// Whether the gradient all-reduce overlaps backward: $NITRO_DIST_OVERLAP, 1 (the default) or 0. Off
// for a model whose backward graph changes with the data in a way the schedule cannot follow
// (E-DIST-013 says so); the sums then start after backward, as in every step's first. E-DIST-014
// for another value.
inline bool overlap_from_environment() {
  char const* v = std::getenv("NITRO_DIST_OVERLAP");
  if (!v || !*v) return true;
  const std::string s(v);
  if (s == "1") return true;
  if (s == "0") return false;
  throw error("E-DIST-014", "NITRO_DIST_OVERLAP is '" + s + "', not 0 or 1",
              "set it to 0 (the gradient all-reduce starts after backward) or 1 (it overlaps backward: the default), or unset it");
}

template <class Store>
class gradient_reducer {
 public:
  static constexpr std::size_t group_count = Store::group_count;

  gradient_reducer(replicas& r, Store& store, bool overlap = overlap_from_environment()) : m_r(&r), m_store(&store), m_overlap(overlap) {
    for (std::size_t g = 0; g < group_count; ++g) {
      if constexpr (Store::layout::grouped) m_labels[g] = "the gradient all-reduce of group '" + std::string(Store::layout::group_names[g]) + "'";
      else m_labels[g] = "the gradient all-reduce";
    }
    m_started.fill(false);
    m_requests.fill(-1);
    m_complete_after.fill(tape::no_node);
    m_touched.fill(tape::no_node);
    m_observer.ctx = this;
    m_observer.backward_begins = [](void* c, std::size_t n) { static_cast<gradient_reducer*>(c)->backward_begins(n); };
    m_observer.after_node = [](void* c, std::size_t i) { static_cast<gradient_reducer*>(c)->after_node(i); };
    m_observer.leaf_gradient = [](void* c, std::size_t i, void const* g, std::size_t) { static_cast<gradient_reducer*>(c)->leaf_gradient(i, g); };
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

  // The observer for the tape of the step's LAST micro-batch (tape::observe_scope): from forward to
  // the end of backward. Null in a job of one rank (nothing to sum). Earlier micro-batches run
  // unobserved: their gradients are not complete.
  tape::observer const* overlap(tape& t) {
    if (m_r->size() == 1 || !m_overlap) return nullptr;
    for (std::size_t g = 0; g < group_count; ++g)  // a step that threw after starting sums: they end first
      if (m_started[g]) {
        if (m_requests[g] >= 0) m_r->wait(m_requests[g]);
        m_requests[g] = -1;
        m_started[g] = false;
      }
    m_tape = &t;
    m_mode = mode::armed;
    m_outside = false;
    m_touched.fill(tape::no_node);
    return &m_observer;
  }
  // Whether the last observed backward started sums during backward (false: it learned, or ran
  // without overlap), and how many steps learned a schedule so far.
  bool overlapped() const noexcept { return m_last_overlapped; }
  std::int64_t schedules_learned() const noexcept { return m_schedules_learned; }
  // The node after which group g's sum starts (tape::no_node: no node touches it, or none learned).
  std::size_t complete_after(std::size_t g) const noexcept { return m_complete_after[g]; }
  // Starts every group not started yet, the last first (backward completes the last layers first).
  void start_all() {
    for (std::size_t g = group_count; g-- > 0;) start(g);
  }
  // Waits for every group's sum. Returns the factor the optimizer multiplies the summed gradient
  // by for the mean over the ranks: 1 / size.
  float finish() {
    start_all();
    m_mode = mode::off;
    m_tape = nullptr;
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
  // off: not observing; armed: overlap() was called, backward not begun; plain: this backward starts
  // nothing (a leaf gradient was handed out outside a node); learning: it records the schedule;
  // overlapping: it starts the sums after the scheduled nodes.
  enum class mode { off, armed, plain, learning, overlapping };

  void backward_begins(std::size_t nodes) {
    m_last_overlapped = false;
    if (m_mode != mode::armed) {  // outside the last micro-batch, or a second backward on one tape
      m_mode = mode::plain;
      return;
    }
    if (m_outside) {
      m_mode = mode::plain;
      return;
    }
    m_nodes = nodes;
    m_fingerprint = m_tape->fingerprint();
    if (m_have_schedule && nodes == m_learned_nodes && m_fingerprint == m_learned_fingerprint) {
      m_mode = mode::overlapping;
      m_last_overlapped = true;
      m_next = group_count;
      advance(nodes);  // groups no node touches are complete already
    } else {
      m_mode = mode::learning;
    }
  }

  void after_node(std::size_t node) {
    if (m_mode == mode::overlapping) {
      advance(node);
      if (m_next < group_count) m_r->progress();  // the started sums move on while backward runs
    } else if (m_mode == mode::learning && node == 0) {  // backward ran every node: the schedule holds for this tape
      m_complete_after = m_touched;
      m_learned_nodes = m_nodes;
      m_learned_fingerprint = m_fingerprint;
      m_have_schedule = true;
      ++m_schedules_learned;
    }
  }

  // Every node >= ran has run: start, in the fixed order G-1 .. 0, each group complete by then.
  void advance(std::size_t ran) {
    while (m_next > 0 && m_complete_after[m_next - 1] >= ran) start(--m_next);
  }

  void leaf_gradient(std::size_t node, void const* grad) {
    float const* base = m_store->grads();
    float const* p = static_cast<float const*>(grad);
    std::less<float const*> before;
    if (before(p, base) || !before(p, base + Store::size)) return;  // not this store's gradient (SAM's own buffer, a test's leaf)
    const std::int64_t at = p - base;
    std::size_t g = 0;
    while (g + 1 < group_count && at >= Store::groups[g + 1].offset) ++g;
    if (m_started[g]) schedule_broken(g, node);
    if (node == tape::no_node) {
      if (m_mode == mode::armed) m_outside = true;
      return;
    }
    if (m_mode == mode::learning && node < m_touched[g]) m_touched[g] = node;
  }

  [[noreturn]] void schedule_broken(std::size_t g, std::size_t node) const {
    const std::string who = node == tape::no_node ? std::string("code running outside backward's nodes")
                                                  : "backward node " + std::to_string(node) + " (of " + std::to_string(m_nodes) + ")";
    throw error("E-DIST-013",
                who + " asked for a parameter gradient summed by " + m_labels[g] + " after that all-reduce had started (step " +
                    std::to_string(m_r->step()) + ")" +
                    ": the backward graph differs from the one whose schedule was learned (the same operations in the same order, but "
                    "a node now writes into a group it did not write into, or writes later)",
                "make forward record the same operations on every step, whatever the data (no branch on the batch's values before "
                "an operation that touches the parameters), or set NITRO_DIST_OVERLAP=0 (the sums start after backward); a gradient "
                "must be taken only inside a backward closure, never kept from forward");
  }

  replicas* m_r;
  Store* m_store;
  std::array<std::string, group_count> m_labels;
  std::array<replicas::request, group_count> m_requests{};
  std::array<bool, group_count> m_started{};

  // the overlap: the observer, the learned schedule, this step's state
  tape::observer m_observer{};
  tape* m_tape = nullptr;
  mode m_mode = mode::off;
  bool m_overlap = true;   // NITRO_DIST_OVERLAP (overlap_from_environment)
  bool m_outside = false;  // a leaf gradient handed out outside a node since overlap()
  bool m_have_schedule = false, m_last_overlapped = false;
  std::array<std::size_t, group_count> m_complete_after{};  // the schedule: the lowest node touching each group
  std::array<std::size_t, group_count> m_touched{};         // this step's, while learning
  std::size_t m_nodes = 0, m_learned_nodes = 0;
  std::uint64_t m_fingerprint = 0, m_learned_fingerprint = 0;
  std::size_t m_next = group_count;  // groups m_next .. G-1 have started (the fixed order G-1 .. 0)
  std::int64_t m_schedules_learned = 0;
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
  static_assert(std::is_trivially_copyable_v<T>, "E-DIST-015: nitro::dist::broadcast_value sends raw bytes, so T must be trivially copyable. Fix: broadcast a number or a plain struct; strings have broadcast_string.");
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
