// nitro/optim/param_store.hpp — a model's parameters (or state) in one flat, aligned buffer.
//
// The layout is computed by the compiler from the layer's spec and a layout policy: every leaf's
// keypath, shape, offset and group are constants. Leaves start on 64-byte boundaries.
//   param_store<Spec>                       declaration order, one span (state buffers, tests)
//   param_store<Spec, float, group_layout<E, Spec>>
//                                           grouped: each parameter group is one contiguous span of
//                                           the values and of the gradients (`group_span(g)`), so the
//                                           optimizer updates a group in one pass.
// `view()` gives the tree of tensors a layer reads; `view(tape)` also registers each trainable leaf
// on the step's tape with its gradient span, so backward accumulates straight into the flat
// gradient buffer (`view(tape, other)` into another buffer of the same layout: SAM's first pass).
#pragma once

#include "nitro/core/tree.hpp"
#include "nitro/nn/param.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <array>        // the leaf table
#include <cstdint>      // int64_t
#include <cstdlib>      // aligned_alloc
#include <cstring>      // memset, memcpy
#include <memory>       // unique_ptr
#include <new>          // bad_alloc
#include <string_view>  // keypaths

namespace nitro {

struct leaf_info {
  std::string_view keypath;
  std::array<std::int64_t, 5> dims{};
  int rank = 0;
  std::int64_t numel = 0;
  std::int64_t offset = 0;  // elements from the buffer's start
  bool trainable = true;
  int group = 0;            // index of its parameter group; -1: in none (not trainable, grouped layout)
  nitro::shape shape() const { return nitro::shape::from(dims.begin(), dims.begin() + rank); }
};

// One group's span of a flat buffer: [offset, offset + size), padding included.
struct group_span {
  std::int64_t offset = 0;
  std::int64_t size = 0;
  std::int64_t count = 0;   // elements without padding
  std::size_t leaves = 0;
};

namespace detail {
inline constexpr std::int64_t leaf_align = 16;  // elements (64 bytes of float)
constexpr std::int64_t align_up(std::int64_t n) noexcept { return (n + leaf_align - 1) / leaf_align * leaf_align; }

template <class Spec>
constexpr auto leaf_shapes() {
  std::array<leaf_info, leaf_count<Spec>()> t{};
  std::size_t i = 0;
  for_each_leaf_type<Spec>([&](auto kp, auto leaf) {
    using L = typename decltype(leaf)::type;
    leaf_info& li = t[i++];
    li.keypath = decltype(kp)::view();
    for (int d = 0; d < L::rank; ++d) li.dims[static_cast<std::size_t>(d)] = L::dims[static_cast<std::size_t>(d)];
    li.rank = L::rank;
    li.numel = L::numel;
    li.trainable = L::trainable;
  });
  return t;
}

// The order in which leaves are laid out (indices into the declaration-order table).
template <class Spec, class Layout>
constexpr auto leaf_order() {
  constexpr std::size_t n = leaf_count<Spec>();
  auto t = leaf_shapes<Spec>();
  std::array<std::size_t, n> order{};
  std::size_t k = 0;
  if constexpr (!Layout::grouped) {
    for (std::size_t i = 0; i < n; ++i) order[k++] = i;
  } else {
    for (int g = 0; g < static_cast<int>(Layout::group_count); ++g)
      for (int pass = 0; pass < 2; ++pass)
        for (std::size_t i = 0; i < n; ++i)
          if (Layout::group_of[i] == g && ((t[i].rank >= 2) == (pass == 0))) order[k++] = i;
    for (std::size_t i = 0; i < n; ++i)
      if (Layout::group_of[i] < 0) order[k++] = i;
  }
  return order;
}

template <class Spec, class Layout>
constexpr auto leaf_table() {
  auto t = leaf_shapes<Spec>();
  auto order = leaf_order<Spec, Layout>();
  std::int64_t off = 0;
  for (std::size_t j = 0; j < order.size(); ++j) {
    leaf_info& li = t[order[j]];
    li.offset = off;
    if constexpr (Layout::grouped) li.group = Layout::group_of[order[j]];
    off = align_up(off + li.numel);
  }
  return t;
}
template <class Spec>
constexpr std::int64_t padded_size() {
  std::int64_t off = 0;
  for_each_leaf_type<Spec>([&](auto, auto leaf) { off = align_up(off + decltype(leaf)::type::numel); });
  return off;
}
template <class Spec, class Layout>
constexpr auto group_table() {
  std::array<group_span, Layout::group_count> spans{};
  auto t = leaf_table<Spec, Layout>();
  for (std::size_t g = 0; g < spans.size(); ++g) {
    std::int64_t lo = -1, hi = 0;
    for (auto const& li : t) {
      if (li.group != static_cast<int>(g)) continue;
      if (lo < 0 || li.offset < lo) lo = li.offset;
      if (li.offset + align_up(li.numel) > hi) hi = li.offset + align_up(li.numel);
      spans[g].count += li.numel;
      ++spans[g].leaves;
    }
    spans[g].offset = lo < 0 ? 0 : lo;
    spans[g].size = lo < 0 ? 0 : hi - lo;
  }
  return spans;
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

template <class Spec, class T = float, class Layout = declaration_layout>
class param_store {
 public:
  using spec = Spec;
  using layout = Layout;
  using tree_type = nn::params_t<Spec, T>;
  static constexpr auto leaves = detail::leaf_table<Spec, Layout>();     // declaration order, with offsets
  static constexpr auto groups = detail::group_table<Spec, Layout>();    // one span per group
  static constexpr std::int64_t size = detail::padded_size<Spec>();      // elements, with padding
  static constexpr std::int64_t count = nn::spec_numel<Spec>();          // elements, without padding
  static constexpr std::size_t group_count = Layout::group_count;

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
  static constexpr group_span group_span_of(std::size_t g) noexcept { return groups[g]; }

  // The tree of tensors viewing the values (no gradients).
  tree_type view() const { return view_of(const_cast<T*>(m_values.get()), nullptr, nullptr, nullptr); }
  // The same, each trainable leaf registered on the tape with its span of the gradient buffer.
  tree_type view(tape& tp) { return view(tp, m_grads.get()); }
  // The same with gradients accumulating into `grads`, a buffer of `size` elements laid out like
  // this store (SAM's first pass writes there, leaving the accumulated gradient alone).
  tree_type view(tape& tp, T* grads) { return view_of(m_values.get(), &tp, grads, nullptr); }
  // The tree over any buffer of this layout (`values`, `size` elements): with a tape, each trainable
  // leaf registered with its span of `grads`; `memory`, when not null, is where both live (a copy
  // of the store in a backend's memory: train/device_params.hpp).
  static tree_type view_of(T* values, tape* tp, T* grads, device_memory* memory) {
    tree_type t;
    std::size_t i = 0;
    for_each_leaf(t, [&](auto, basic_tensor<T>& leaf) {
      leaf_info const& li = leaves[i++];
      int v = (tp && li.trainable && grads) ? tp->leaf(grads + li.offset, sizeof(T) * static_cast<std::size_t>(li.numel)) : -1;
      leaf = basic_tensor<T>(values + li.offset, li.shape(), v);
      if (memory) leaf.set_memory(memory);
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
