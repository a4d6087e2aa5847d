// nitro/tensor/tape.hpp — reverse-mode gradients: the step context and its tape.
//
// While forward and loss run inside a training step, every differentiable operation records one
// coarse node on the tape: a closure that, given the gradient of its output, adds the gradients
// of its inputs. backward() runs the nodes in reverse. Nodes, their captures and every gradient
// buffer live in the step's arena, so after the first step a step allocates nothing.
//
// A "variable" is a tape slot for a gradient: intermediates get one lazily-zeroed buffer from the
// arena; parameters are leaves whose gradient buffer is a span of their group's flat buffer.
// Gradients live where the arena's memory is (the backend's device) and are zeroed and seeded
// through it; the closures run on the host, so on a device they live in a host arena of their own
// (on the CPU both are the one arena).
//
// An observer (null by default) watches backward run: told the node count before the first node,
// called after each node, and told whenever a leaf's gradient buffer is handed out (grad(v) of a
// leaf) with the node asking — the data-parallel reducer (dist/gradients.hpp) learns from it which
// node completes each parameter group and starts the group's sum right after that node. Every
// node reaches a leaf's gradient through grad(v) while it runs, never through a pointer taken at
// record time (no operation of nitro does; one that would is reported with node = no_node, and the
// reducer then overlaps nothing that step). Unobserved, backward() costs one branch per call.
#pragma once

#include "nitro/tensor/arena.hpp"

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <new>          // placement new
#include <type_traits>  // is_trivially_destructible, remove_cvref_t
#include <vector>       // nodes, variables

namespace nitro {

class tape {
 public:
  // The node index reported for a leaf's gradient handed out while no node runs (forward, or the
  // seed of backward).
  static constexpr std::size_t no_node = static_cast<std::size_t>(-1);

  // Watches backward (see the top of this file). Every function is set; ctx is passed back.
  struct observer {
    void* ctx = nullptr;
    void (*backward_begins)(void* ctx, std::size_t nodes) = nullptr;  // before the first node runs
    void (*after_node)(void* ctx, std::size_t node) = nullptr;        // node (its recording index) ran
    void (*leaf_gradient)(void* ctx, std::size_t node, void const* grad, std::size_t bytes) = nullptr;  // grad(v) of a leaf
  };

  explicit tape(arena& memory) : tape(memory, memory) {}
  // Gradients in `memory`, closures in `closures` (host memory).
  tape(arena& memory, arena& closures) : m_arena(&memory), m_closures(&closures) { m_vars.reserve(256); m_nodes.reserve(256); }

  // A new intermediate variable of `bytes` bytes; its gradient is allocated on first use.
  int new_var(std::size_t bytes) {
    m_vars.push_back({nullptr, bytes, false});
    return static_cast<int>(m_vars.size()) - 1;
  }
  // A leaf whose gradient accumulates into caller-owned memory (a span of a flat gradient buffer).
  int leaf(void* grad, std::size_t bytes) {
    m_vars.push_back({grad, bytes, true});
    return static_cast<int>(m_vars.size()) - 1;
  }

  // The gradient buffer of v: zeroed on first request.
  template <class T>
  T* grad(int v) {
    var& x = m_vars[static_cast<std::size_t>(v)];
    if (x.external && m_observer) m_observer->leaf_gradient(m_observer->ctx, m_running, x.grad, x.bytes);
    if (!x.grad) {
      x.grad = m_arena->allocate(x.bytes);
      m_arena->memory().zero(x.grad, x.bytes);
    }
    return static_cast<T*>(x.grad);
  }
  // The gradient of v if any gradient has reached it, else nullptr (its node can be skipped).
  template <class T>
  T* grad_if_any(int v) const {
    return static_cast<T*>(m_vars[static_cast<std::size_t>(v)].grad);
  }
  bool is_leaf(int v) const { return m_vars[static_cast<std::size_t>(v)].external; }

  // Records a backward closure. It must be trivially destructible (it captures pointers and
  // extents, never owning objects) because the arena frees it without running destructors.
  template <class F>
  void record(F&& backward) {
    using Fn = std::remove_cvref_t<F>;
    static_assert(std::is_trivially_destructible_v<Fn>,
                  "E-LAYER-017: a backward closure given to nitro::tape::record captures a value that is not trivially destructible. Fix: capture only "
                  "pointers, extents and scalars.");
    void* p = m_closures->allocate(sizeof(Fn), alignof(Fn) > 16 ? alignof(Fn) : 16);
    new (p) Fn(static_cast<F&&>(backward));
    m_nodes.push_back({[](void* f, tape& t) { (*static_cast<Fn*>(f))(t); }, p});
  }

  // Seeds d(out)/d(out) = seed and runs every node in reverse order of recording.
  template <class T>
  void backward(int out, T seed) {
    var& x = m_vars[static_cast<std::size_t>(out)];
    const std::size_t n = x.bytes / sizeof(T);
    if (x.grad || x.external) m_arena->memory().add(grad<T>(out), n, seed);
    else {  // the usual case, a loss nothing else read: its gradient is the seed
      x.grad = m_arena->allocate(x.bytes);
      m_arena->memory().fill(static_cast<T*>(x.grad), n, seed);
    }
    if (m_observer) return observed_backward();
    for (std::size_t i = m_nodes.size(); i-- > 0;) m_nodes[i].run(m_nodes[i].fn, *this);
  }

  // The observer of the next backward() runs (null: none). It must outlive them, or be unset first
  // (observe_scope does both).
  void observe(observer const* o) noexcept { m_observer = o; }
  observer const* observed_by() const noexcept { return m_observer; }
  // The node running now in an observed backward(), else no_node.
  std::size_t running_node() const noexcept { return m_running; }

  // What the recorded nodes are: their count and, in order, which operation each one is (the type
  // of its closure). Two steps that record the same operations in the same order have the same
  // fingerprint; a step whose graph changed almost surely has another.
  std::uint64_t fingerprint() const noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL ^ m_nodes.size();
    for (node const& x : m_nodes) h = (h ^ reinterpret_cast<std::uintptr_t>(x.run)) * 0x100000001b3ULL;
    return h;
  }

  std::size_t node_count() const noexcept { return m_nodes.size(); }
  std::size_t var_count() const noexcept { return m_vars.size(); }
  // Where gradients and a layer's scratch for its backward live (the backend's memory).
  arena& memory() noexcept { return *m_arena; }

  // Forgets every node and variable, keeping capacity (and the observer).
  void clear() noexcept {
    m_vars.clear();
    m_nodes.clear();
    m_running = no_node;
  }

  // Observes a tape for a scope (o may be null: nothing changes); the previous observer comes back.
  class observe_scope {
   public:
    observe_scope(tape& t, observer const* o) noexcept : m_tape(&t), m_prev(t.m_observer) {
      if (o) t.m_observer = o;
    }
    ~observe_scope() { m_tape->m_observer = m_prev; }
    observe_scope(observe_scope const&) = delete;
    observe_scope& operator=(observe_scope const&) = delete;

   private:
    tape* m_tape;
    observer const* m_prev;
  };

 private:
  struct var { void* grad; std::size_t bytes; bool external; };
  struct node { void (*run)(void*, tape&); void* fn; };

  void observed_backward() {
    observer const& o = *m_observer;
    struct idle {  // no node runs once backward ended, also when a node (or the observer) threw
      std::size_t& running;
      ~idle() { running = no_node; }
    } done{m_running};
    o.backward_begins(o.ctx, m_nodes.size());
    for (std::size_t i = m_nodes.size(); i-- > 0;) {
      m_running = i;
      m_nodes[i].run(m_nodes[i].fn, *this);
      m_running = no_node;
      o.after_node(o.ctx, i);
    }
  }

  arena* m_arena;
  arena* m_closures;
  std::vector<var> m_vars;
  std::vector<node> m_nodes;
  observer const* m_observer = nullptr;
  std::size_t m_running = no_node;
};

class device_ops;  // tensor/device_ops.hpp

// What the operations of one step share: where intermediates live, whether gradients are being
// recorded, whether layers run in training mode, the step's random stream, and the backend's kernels.

struct step_context {
  arena* memory = nullptr;
  nitro::tape* tape = nullptr;  // null: no gradients (evaluation, prediction)
  bool training = false;
  std::uint64_t seed = 0;       // folded with a per-call counter for dropout masks
  std::uint64_t counter = 0;
  device_ops* ops = nullptr;    // the backend's kernels (null: the CPU's); tensor/backend.hpp
};

namespace detail {
inline step_context*& current_context() noexcept {
  thread_local step_context* ctx = nullptr;
  return ctx;
}
}  // namespace detail

inline step_context* current_context() noexcept { return detail::current_context(); }

// Installs a context for the scope (nests: the previous one is restored).
class context_scope {
 public:
  explicit context_scope(step_context& c) noexcept : m_prev(detail::current_context()) { detail::current_context() = &c; }
  ~context_scope() { detail::current_context() = m_prev; }
  context_scope(context_scope const&) = delete;
  context_scope& operator=(context_scope const&) = delete;

 private:
  step_context* m_prev;
};

// Turns gradient recording off for a scope (like torch.no_grad).
class no_grad {
 public:
  no_grad() noexcept : m_ctx(detail::current_context()), m_tape(m_ctx ? m_ctx->tape : nullptr) { if (m_ctx) m_ctx->tape = nullptr; }
  ~no_grad() { if (m_ctx) m_ctx->tape = m_tape; }
  no_grad(no_grad const&) = delete;
  no_grad& operator=(no_grad const&) = delete;

 private:
  step_context* m_ctx;
  nitro::tape* m_tape;
};

}  // namespace nitro
