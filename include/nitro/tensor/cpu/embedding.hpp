// nitro/tensor/cpu/embedding.hpp — the CPU's embedding lookup, forward and backward.
//
//   cpu::embedding<float>(vocab, dim, count, idx, w, y);       // -1, or the first bad index's position
//   cpu::embedding_backward<float>(vocab, dim, count, idx, gy, gw);
//
// Whole columns copied; the backward adds them position after position (a token met twice sums
// in order), the order the GPU's kernel keeps too.
#pragma once

#include "nitro/tensor/cpu/elementwise.hpp"  // detail::flat

#include <cmath>    // floor
#include <cstddef>  // size_t
#include <cstdint>  // int64_t
#include <cstring>  // memcpy

namespace nitro::cpu {

template <class T>
std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, T const* idx, T const* w, T* y) {
  for (std::int64_t n = 0; n < count; ++n) {
    const T v = idx[n];
    if (!(v >= T(0) && v < T(vocab) && v == std::floor(v))) return n;
  }
  for (std::int64_t n = 0; n < count; ++n)
    std::memcpy(y + n * dim, w + static_cast<std::int64_t>(idx[n]) * dim, sizeof(T) * static_cast<std::size_t>(dim));
  return -1;
}
template <class T>
void embedding_backward(std::int64_t, std::int64_t dim, std::int64_t count, T const* idx, T const* gy, T* gw) {
  for (std::int64_t n = 0; n < count; ++n) detail::flat(gw + static_cast<std::int64_t>(idx[n]) * dim, dim) += detail::flat(gy + n * dim, dim);
}

}  // namespace nitro::cpu
