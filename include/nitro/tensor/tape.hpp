// nitro/tensor/tape.hpp — reverse-mode gradients: the step context and its tape.
//
// While forward and loss run inside a training step, every differentiable operation records one
// coarse node on the tape: a closure that, given the gradient of its output, adds the gradients
// of its inputs. backward() runs the nodes in reverse. Nodes, their captures and every gradient
// buffer live in the step's arena, so after the first step a step allocates nothing.
//
// A "variable" is a tape slot for a gradient: intermediates get one lazily-zeroed buffer from the
// arena; parameters are leaves whose gradient buffer is a span of their group's flat buffer.
#pragma once

#include "nitro/tensor/arena.hpp"

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstring>      // memset
#include <new>          // placement new
#include <type_traits>  // is_trivially_destructible
#include <vector>       // nodes, variables

namespace nitro {

class tape {
 public:
  explicit tape(arena& memory) : m_arena(&memory) { m_vars.reserve(256); m_nodes.reserve(256); }

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
    if (!x.grad) {
      x.grad = m_arena->allocate(x.bytes);
      std::memset(x.grad, 0, x.bytes);
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
                  "nitro::tape::record: a backward closure must capture only trivially destructible values "
                  "(pointers, extents, scalars)");
    void* p = m_arena->allocate(sizeof(Fn), alignof(Fn) > 16 ? alignof(Fn) : 16);
    new (p) Fn(static_cast<F&&>(backward));
    m_nodes.push_back({[](void* f, tape& t) { (*static_cast<Fn*>(f))(t); }, p});
  }

  // Seeds d(out)/d(out) = seed and runs every node in reverse order of recording.
  template <class T>
  void backward(int out, T seed) {
    T* g = grad<T>(out);
    std::size_t n = m_vars[static_cast<std::size_t>(out)].bytes / sizeof(T);
    for (std::size_t i = 0; i < n; ++i) g[i] += seed;
    for (std::size_t i = m_nodes.size(); i-- > 0;) m_nodes[i].run(m_nodes[i].fn, *this);
  }

  std::size_t node_count() const noexcept { return m_nodes.size(); }
  std::size_t var_count() const noexcept { return m_vars.size(); }
  arena& memory() noexcept { return *m_arena; }

  // Forgets every node and variable, keeping capacity.
  void clear() noexcept { m_vars.clear(); m_nodes.clear(); }

 private:
  struct var { void* grad; std::size_t bytes; bool external; };
  struct node { void (*run)(void*, tape&); void* fn; };
  arena* m_arena;
  std::vector<var> m_vars;
  std::vector<node> m_nodes;
};

// What the operations of one step share: where intermediates live, whether gradients are being
// recorded, whether layers run in training mode, and the step's random stream.
struct step_context {
  arena* memory = nullptr;
  nitro::tape* tape = nullptr;  // null: no gradients (evaluation, prediction)
  bool training = false;
  std::uint64_t seed = 0;       // folded with a per-call counter for dropout masks
  std::uint64_t counter = 0;
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
