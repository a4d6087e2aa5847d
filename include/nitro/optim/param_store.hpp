// nitro/optim/param_store.hpp — a model's parameters (or state) in one flat, aligned buffer.
//
// The layout is computed by the compiler from the layer's spec: every leaf's keypath, shape and
// offset are constants. Leaves start on 64-byte boundaries. `view()` gives the tree of tensors a
// layer reads; `view(tape)` also registers each leaf on the step's tape with its gradient span in
// the flat gradient buffer, so backward accumulates straight into it.
#pragma once

#include "nitro/core/tree.hpp"
#include "nitro/nn/param.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <array>        // the leaf table
#include <cstdint>      // int64_t
#include <cstdlib>      // aligned_alloc
#include <cstring>      // memset, memcpy
#include <memory>       // unique_ptr
#include <string_view>  // keypaths

namespace nitro {

struct leaf_info {
  std::string_view keypath;
  std::array<std::int64_t, 5> dims{};
  int rank = 0;
  std::int64_t numel = 0;
  std::int64_t offset = 0;  // elements from the buffer's start
  bool trainable = true;
  nitro::shape shape() const { return nitro::shape::from(dims.begin(), dims.begin() + rank); }
};

namespace detail {
inline constexpr std::int64_t leaf_align = 16;  // elements (64 bytes of float)
constexpr std::int64_t align_up(std::int64_t n) noexcept { return (n + leaf_align - 1) / leaf_align * leaf_align; }

template <class Spec>
constexpr auto leaf_table() {
  std::array<leaf_info, leaf_count<Spec>()> t{};
  std::size_t i = 0;
  std::int64_t off = 0;
  for_each_leaf_type<Spec>([&](auto kp, auto leaf) {
    using L = typename decltype(leaf)::type;
    leaf_info& li = t[i++];
    li.keypath = decltype(kp)::view();
    for (int d = 0; d < L::rank; ++d) li.dims[static_cast<std::size_t>(d)] = L::dims[static_cast<std::size_t>(d)];
    li.rank = L::rank;
    li.numel = L::numel;
    li.offset = off;
    li.trainable = L::trainable;
    off = align_up(off + L::numel);
  });
  return t;
}
template <class Spec>
constexpr std::int64_t padded_size() {
  std::int64_t off = 0;
  for_each_leaf_type<Spec>([&](auto, auto leaf) { off = align_up(off + decltype(leaf)::type::numel); });
  return off;
}

struct free_deleter { void operator()(void* p) const noexcept { std::free(p); } };
template <class T>
std::unique_ptr<T[], free_deleter> aligned_zeros(std::int64_t n) {
  std::size_t bytes = static_cast<std::size_t>(align_up(n > 0 ? n : 1)) * sizeof(T);
  bytes = (bytes + 63) / 64 * 64;
  T* p = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::unique_ptr<T[], free_deleter>(p);
}
}  // namespace detail

template <class Spec, class T = float>
class param_store {
 public:
  using spec = Spec;
  using tree_type = nn::params_t<Spec, T>;
  static constexpr auto leaves = detail::leaf_table<Spec>();
  static constexpr std::int64_t size = detail::padded_size<Spec>();  // elements, with padding
  static constexpr std::int64_t count = nn::spec_numel<Spec>();      // elements, without padding

  explicit param_store(bool with_grads = true)
      : m_values(detail::aligned_zeros<T>(size)), m_grads(with_grads ? detail::aligned_zeros<T>(size) : nullptr) {}
  param_store(param_store const& o) : param_store(o.m_grads != nullptr) { copy_from(o); }
  param_store& operator=(param_store const& o) { if (this != &o) copy_from(o); return *this; }
  param_store(param_store&&) noexcept = default;
  param_store& operator=(param_store&&) noexcept = default;

  T* values() noexcept { return m_values.get(); }
  T const* values() const noexcept { return m_values.get(); }
  T* grads() noexcept { return m_grads.get(); }
  T const* grads() const noexcept { return m_grads.get(); }
  void zero_grads() noexcept { if (m_grads) std::memset(m_grads.get(), 0, sizeof(T) * static_cast<std::size_t>(size)); }

  // The tree of tensors viewing the values (no gradients).
  tree_type view() const {
    tree_type t;
    std::size_t i = 0;
    for_each_leaf(t, [&](auto, basic_tensor<T>& leaf) {
      leaf_info const& li = leaves[i++];
      leaf = basic_tensor<T>(const_cast<T*>(m_values.get()) + li.offset, li.shape());
    });
    return t;
  }
  // The same, each trainable leaf registered on the tape with its span of the gradient buffer.
  tree_type view(tape& tp) {
    tree_type t;
    std::size_t i = 0;
    for_each_leaf(t, [&](auto, basic_tensor<T>& leaf) {
      leaf_info const& li = leaves[i++];
      int v = (li.trainable && m_grads) ? tp.leaf(m_grads.get() + li.offset, sizeof(T) * static_cast<std::size_t>(li.numel)) : -1;
      leaf = basic_tensor<T>(m_values.get() + li.offset, li.shape(), v);
    });
    return t;
  }
  // Copies a tree's values in (st_new back into the state, a checkpoint's tensors, ...).
  void assign(tree_type const& t) {
    std::size_t i = 0;
    for_each_leaf(t, [&](auto, basic_tensor<T> const& leaf) {
      leaf_info const& li = leaves[i++];
      if (leaf.defined() && leaf.data() != m_values.get() + li.offset)
        std::memcpy(m_values.get() + li.offset, leaf.data(), sizeof(T) * static_cast<std::size_t>(li.numel));
    });
  }

 private:
  void copy_from(param_store const& o) {
    std::memcpy(m_values.get(), o.m_values.get(), sizeof(T) * static_cast<std::size_t>(size));
    if (m_grads && o.m_grads) std::memcpy(m_grads.get(), o.m_grads.get(), sizeof(T) * static_cast<std::size_t>(size));
  }
  std::unique_ptr<T[], detail::free_deleter> m_values;
  std::unique_ptr<T[], detail::free_deleter> m_grads;
};

}  // namespace nitro
