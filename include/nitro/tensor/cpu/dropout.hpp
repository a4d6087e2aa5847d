// nitro/tensor/cpu/dropout.hpp — the CPU's dropout, forward and backward.
//
//   cpu::dropout<float>(seed, below, n, scale, x, y);          // tensor/dropout_mask.hpp decides
//   cpu::dropout_backward<float>(seed, below, n, scale, gy, gx);
//
// The mask is the counter-based one every backend shares (tensor/dropout_mask.hpp), so the GPU's
// kernel drops the same elements.
#pragma once

#include "nitro/tensor/dropout_mask.hpp"

#include <cstdint>  // int64_t, uint64_t

namespace nitro::cpu {

namespace detail {
// f(i, kept) for every element, one 64-bit word per pair of elements (the definition's halves).
template <class F>
void for_each_kept(std::uint64_t seed, std::uint64_t below, std::int64_t n, F&& f) {
  std::int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const std::uint64_t w = dropout_mask::word(seed, static_cast<std::uint64_t>(i) >> 1);
    f(i, (w & 0xffffffffu) >= below);
    f(i + 1, (w >> 32) >= below);
  }
  if (i < n) f(i, dropout_mask::keeps(seed, i, below));
}
}  // namespace detail

template <class T>
void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* x, T* y) {
  detail::for_each_kept(seed, below, n, [&](std::int64_t i, bool keep) { y[i] = keep ? x[i] * scale : T(0); });
}
template <class T>
void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* gy, T* gx) {
  detail::for_each_kept(seed, below, n, [&](std::int64_t i, bool keep) {
    if (keep) gx[i] += gy[i] * scale;
  });
}

}  // namespace nitro::cpu
