// nitro/tensor/dropout_mask.hpp — which elements a dropout keeps: one definition for every backend.
//
//   nitro::dropout_mask::keeps(seed, i, below)    element i of the call seeded `seed` is kept
//   nitro::dropout_mask::threshold(p)             below for a drop probability p: p 2^32
//
// The mask is counter-based: element i reads half (i & 1) of 64-bit word i / 2, and word j is
// SplitMix64's output j of a stream started at the seed (nitro::splitmix64(seed + j golden)). Any
// element's fate is known without drawing the ones before it, so a GPU thread or a CPU share can
// start anywhere and every backend drops the same elements. An element is dropped when its 32-bit
// draw is below `below`; p = 1 gives 2^32, above every draw.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cstdint>  // uint64_t, uint32_t

namespace nitro::dropout_mask {

NITRO_HD_INLINE std::uint64_t word(std::uint64_t seed, std::uint64_t j) {
  std::uint64_t x = seed + (j + 1) * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
NITRO_HD_INLINE std::uint32_t draw(std::uint64_t seed, std::int64_t i) {
  const std::uint64_t w = word(seed, static_cast<std::uint64_t>(i) >> 1);
  return static_cast<std::uint32_t>((i & 1) ? w >> 32 : w);
}
NITRO_HD_INLINE bool keeps(std::uint64_t seed, std::int64_t i, std::uint64_t below) { return draw(seed, i) >= below; }
inline std::uint64_t threshold(double p) { return static_cast<std::uint64_t>(p * 4294967296.0); }

}  // namespace nitro::dropout_mask
