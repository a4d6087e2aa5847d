// nitro/nn/layers/detail/spatial.hpp — what the image layers (conv2d, max_pool, avg_pool) share:
// the WHCN input checks and output extents. Internal: include nitro/nn/layers/conv2d.hpp or pool.hpp.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/shape.hpp"

#include <cstdint>  // int64_t
#include <string>   // messages

namespace nitro::nn::detail {

// static_assert(checks_evaluated<require<Diagnostic, ok>()>): instantiates the diagnostic (whose
// static_assert names the mistake) only when ok is false.
template <class Diagnostic, bool Ok>
constexpr bool require() {
  if constexpr (Ok) return true;
  else return Diagnostic::ok;
}

// The extents of a WHCN input and of the output a window of K (stride S, padding Pad) gives.
struct image_geometry {
  std::int64_t w = 0, h = 0, c = 0, b = 0;  // input [w, h, c, b]
  std::int64_t ow = 0, oh = 0;              // output width and height
  std::int64_t in_plane() const noexcept { return w * h; }
  std::int64_t out_plane() const noexcept { return ow * oh; }
};

// Checks a layer's input and computes the output extents. `channels` < 0 accepts any count.
// `describe` is called only to build a message.
template <class Describe>
image_geometry check_image(shape const& s, std::int64_t channels, std::int64_t k, std::int64_t stride, std::int64_t pad,
                           Describe const& describe) {
  if (s.rank() != 4)
    throw error("E-LAYER-001",
                describe() + " takes images [width, height, channels, batch], got a tensor of shape " + s.to_string(),
                s.rank() == 3 ? "add the channel dimension: x.reshape({w, h, 1, batch}) for one channel"
                              : "reshape the input to [width, height, channels, batch] (WHCN, batch last)");
  image_geometry g{s[0], s[1], s[2], s[3], 0, 0};
  if (channels >= 0 && g.c != channels)
    throw error("E-LAYER-002",
                describe() + " expects " + std::to_string(channels) + " input channels, got " + std::to_string(g.c) +
                    " (input shape " + s.to_string() + ")",
                "make the previous layer produce " + std::to_string(channels) + " channels, or change this layer's input channels");
  if (g.w + 2 * pad < k || g.h + 2 * pad < k)
    throw error("E-LAYER-003",
                describe() + ": the input's " + std::to_string(g.w) + " x " + std::to_string(g.h) + " pixels" +
                    (pad ? " (padded by " + std::to_string(pad) + ")" : std::string()) + " are smaller than the " +
                    std::to_string(k) + " x " + std::to_string(k) + " window",
                "use a smaller kernel, more padding, or fewer downsampling layers before this one");
  g.ow = (g.w + 2 * pad - k) / stride + 1;
  g.oh = (g.h + 2 * pad - k) / stride + 1;
  return g;
}

}  // namespace nitro::nn::detail
