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

template <class T>
void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* x, T* y) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = dropout_mask::keeps(seed, i, below) ? x[i] * scale : T(0);
}
template <class T>
void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, T scale, T const* gy, T* gx) {
  for (std::int64_t i = 0; i < n; ++i)
    if (dropout_mask::keeps(seed, i, below)) gx[i] += gy[i] * scale;
}

}  // namespace nitro::cpu
