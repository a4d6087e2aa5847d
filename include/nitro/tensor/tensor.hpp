// nitro/tensor/tensor.hpp — the tensor a hook sees.
//
// `nitro::Tensor` (float32) and `basic_tensor<double>` (for gradient checks) are views: a pointer,
// a shape, and — inside a training step — the tape variable that carries its gradient. A tensor
// made inside a step lives in the step's arena, on the backend's device (device() says which), and
// is valid until the step ends; a tensor made outside a step (tests, predict's results, data) owns
// host memory through a shared pointer.
// Column-major, batch dimension last.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/device.hpp"
#include "nitro/tensor/memory.hpp"
#include "nitro/tensor/shape.hpp"
#include "nitro/tensor/tape.hpp"

#include <algorithm>         // copy, fill
#include <cstdint>           // int64_t
#include <cstring>           // memcpy
#include <initializer_list>  // literals in tests
#include <memory>            // shared_ptr owner
#include <ostream>           // printing
#include <type_traits>       // is_floating_point
#include <vector>            // from_vector

namespace nitro {

template <class T>
class basic_tensor {
 public:
  using scalar = T;

  basic_tensor() noexcept = default;

  // A view of memory someone else owns (a batch buffer, a flat parameter buffer).
  basic_tensor(T* data, nitro::shape s, int var = -1) noexcept : m_data(data), m_shape(s), m_var(var) {}

  // Allocation: from the step's arena inside a step, owned memory outside one. Not zeroed.
  static basic_tensor empty(nitro::shape s) {
    basic_tensor t;
    t.m_shape = s;
    std::size_t n = static_cast<std::size_t>(s.numel());
    if (step_context* c = current_context(); c && c->memory) {
      t.m_data = c->memory->allocate_n<T>(n == 0 ? 1 : n);
      if (c->memory->device() != device_kind::cpu) t.m_memory = &c->memory->memory();
    } else {
      std::shared_ptr<T[]> p(new T[n == 0 ? 1 : n]);
      t.m_data = p.get();
      t.m_owner = std::move(p);
    }
    return t;
  }
  // Owned memory, whatever the context: for results that outlive the step.
  static basic_tensor owned(nitro::shape s) {
    basic_tensor t;
    t.m_shape = s;
    std::size_t n = static_cast<std::size_t>(s.numel());
    std::shared_ptr<T[]> p(new T[n == 0 ? 1 : n]());
    t.m_data = p.get();
    t.m_owner = std::move(p);
    return t;
  }
  static basic_tensor zeros(nitro::shape s) { return full(s, T(0)); }
  static basic_tensor full(nitro::shape s, T v) {
    basic_tensor t = empty(s);
    if (!t.m_memory) std::fill_n(t.m_data, s.numel(), v);
    else t.m_memory->fill(t.m_data, static_cast<std::size_t>(s.numel()), v);
    return t;
  }
  static basic_tensor from(std::vector<T> const& values, nitro::shape s) {
    if (static_cast<std::int64_t>(values.size()) != s.numel())
      throw error("E-SHAPE-003", "from(values, shape): " + std::to_string(values.size()) + " values do not fill shape " + s.to_string(),
                  "pass exactly shape.numel() values, column-major");
    basic_tensor t = empty(s);
    if (!t.m_memory) std::copy(values.begin(), values.end(), t.m_data);
    else t.m_memory->copy_from_host(t.m_data, values.data(), sizeof(T) * values.size());
    return t;
  }
  static basic_tensor from(std::initializer_list<T> values, nitro::shape s) { return from(std::vector<T>(values), s); }

  // ---- what it is ------------------------------------------------------------------------------
  T* data() noexcept { return m_data; }
  T const* data() const noexcept { return m_data; }
  nitro::shape const& shape() const noexcept { return m_shape; }
  int rank() const noexcept { return m_shape.rank(); }
  std::int64_t numel() const noexcept { return m_shape.numel(); }
  std::int64_t size(int dim) const noexcept { return m_shape[dim < 0 ? m_shape.rank() + dim : dim]; }
  std::int64_t batch() const noexcept { return m_shape.batch(); }
  std::int64_t features() const noexcept { return m_shape.features(); }
  bool defined() const noexcept { return m_data != nullptr; }
  device_kind device() const noexcept { return m_memory ? m_memory->device() : device_kind::cpu; }
  // The memory it is in when that is not the host's (null on the host): what reads it back.
  device_memory* memory() const noexcept { return m_memory; }
  bool owns_memory() const noexcept { return m_owner != nullptr; }

  // ---- gradients -------------------------------------------------------------------------------
  int var() const noexcept { return m_var; }
  bool requires_grad() const noexcept { return m_var >= 0; }
  // The gradient that reached this tensor in the current step's backward (inside the step only).
  basic_tensor grad() const {
    step_context* c = current_context();
    if (!c || !c->tape || m_var < 0) return {};
    T* g = c->tape->template grad_if_any<T>(m_var);
    if (!g) return {};
    basic_tensor r(g, m_shape);
    if (c->tape->memory().device() != device_kind::cpu) r.m_memory = &c->tape->memory().memory();
    return r;
  }
  // The same tensor, detached from the tape.
  basic_tensor detach() const noexcept { basic_tensor t = *this; t.m_var = -1; return t; }

  // ---- elements --------------------------------------------------------------------------------
  // Element access is the host's (a tensor in host memory); item(), to_vector() and clone() read a
  // tensor wherever it is, through its memory.
  T& operator[](std::int64_t i) noexcept { return m_data[i]; }
  T const& operator[](std::int64_t i) const noexcept { return m_data[i]; }
  T& operator()(std::int64_t i, std::int64_t j) noexcept { return m_data[i + j * m_shape[0]]; }
  T const& operator()(std::int64_t i, std::int64_t j) const noexcept { return m_data[i + j * m_shape[0]]; }
  T item() const {
    if (numel() != 1)
      throw error("E-SHAPE-004", "item() needs a tensor of one element, this one has shape " + m_shape.to_string(),
                  "reduce it first (nitro::sum, nitro::mean)");
    if (!m_memory) return m_data[0];
    T v;
    m_memory->copy_to_host(&v, m_data, sizeof(T));
    return v;
  }
  std::vector<T> to_vector() const {
    if (!m_memory) return std::vector<T>(m_data, m_data + numel());
    std::vector<T> v(static_cast<std::size_t>(numel()));
    m_memory->copy_to_host(v.data(), m_data, sizeof(T) * v.size());
    return v;
  }

  // A copy in host memory that owns it (to keep a value past the step).
  basic_tensor clone() const {
    basic_tensor t = owned(m_shape);
    const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(numel());
    if (!m_memory) std::memcpy(t.m_data, m_data, bytes);
    else m_memory->copy_to_host(t.m_data, m_data, bytes);
    return t;
  }

  // ---- views (share memory and gradient) -------------------------------------------------------
  basic_tensor reshape(nitro::shape s) const {
    if (s.numel() != numel())
      throw error("E-SHAPE-005", "reshape from " + m_shape.to_string() + " to " + s.to_string() + " changes the element count",
                  "keep the product of the extents the same");
    basic_tensor t = *this;
    t.m_shape = s;
    return t;
  }

  // for backends and the trainer
  void set_var(int v) noexcept { m_var = v; }
  // A view of memory on a device (null: the host's): what the backend's to_device hands back.
  void set_memory(device_memory* m) noexcept { m_memory = m; }

 private:
  T* m_data = nullptr;
  nitro::shape m_shape{};
  int m_var = -1;
  device_memory* m_memory = nullptr;  // null: host memory
  std::shared_ptr<T[]> m_owner;
};

using Tensor = basic_tensor<float>;
using Index = basic_tensor<std::int64_t>;

template <class T>
std::ostream& operator<<(std::ostream& os, basic_tensor<T> const& t) {
  os << "tensor" << t.shape().to_string() << "{";
  std::int64_t n = t.numel(), shown = n < 8 ? n : 8;
  basic_tensor<T> const host = t.memory() ? t.clone() : t;
  for (std::int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << host[i];
  if (n > shown) os << ", ...";
  return os << "}";
}

}  // namespace nitro
