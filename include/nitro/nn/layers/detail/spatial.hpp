// nitro/nn/layers/detail/spatial.hpp — what the image layers (conv2d, max_pool, avg_pool) share:
// the WHCN input checks, output extents, im2col/col2im, and splitting a batch into fixed chunks that
// run on the CPU backend's threads. Internal: include nitro/nn/layers/conv2d.hpp or pool.hpp.
//
// Chunks are fixed by the batch size alone (not by the thread count), and partial sums are added in
// chunk order, so a step gives the same bytes however many threads run it.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/tensor.hpp"

#include <algorithm>  // min, max, fill_n
#include <cstdint>    // int64_t
#include <string>     // messages

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

// The output columns ox in [lo, hi) whose input column ox*S - Pad + kx lies inside [0, w).
template <std::int64_t S, std::int64_t Pad>
inline void valid_range(std::int64_t kx, std::int64_t w, std::int64_t ow, std::int64_t& lo, std::int64_t& hi) noexcept {
  const std::int64_t before = Pad - kx;  // ox*S >= before
  lo = before > 0 ? (before + S - 1) / S : 0;
  const std::int64_t last = w - 1 + Pad - kx;  // ox*S <= last
  hi = last < 0 ? 0 : std::min<std::int64_t>(ow, last / S + 1);
  lo = std::min(lo, hi);
}

// One image [w, h, c] -> col [ow*oh, K*K*c] (column-major: output positions vary fastest, then kx,
// ky, channel — the order of the weight's [kx, ky, cin] rows). Out-of-image taps read zero.
template <std::int64_t K, std::int64_t S, std::int64_t Pad, class T>
void im2col(T const* x, image_geometry const& g, T* col) {
  const std::int64_t P = g.out_plane();
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t ky = 0; ky < K; ++ky)
      for (std::int64_t kx = 0; kx < K; ++kx) {
        T* dst = col + P * (kx + K * (ky + K * c));
        std::int64_t lo, hi;
        valid_range<S, Pad>(kx, g.w, g.ow, lo, hi);
        const std::int64_t off = kx - Pad;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          T* d = dst + g.ow * oy;
          const std::int64_t iy = oy * S - Pad + ky;
          if (iy < 0 || iy >= g.h) {
            std::fill_n(d, g.ow, T(0));
            continue;
          }
          T const* row = x + g.w * (iy + g.h * c);
          for (std::int64_t ox = 0; ox < lo; ++ox) d[ox] = T(0);
          for (std::int64_t ox = lo; ox < hi; ++ox) d[ox] = row[ox * S + off];
          for (std::int64_t ox = hi; ox < g.ow; ++ox) d[ox] = T(0);
        }
      }
}

// The adjoint of im2col: dx[w, h, c] += the taps of dcol that came from each pixel.
template <std::int64_t K, std::int64_t S, std::int64_t Pad, class T>
void col2im(T const* dcol, image_geometry const& g, T* dx) {
  const std::int64_t P = g.out_plane();
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t ky = 0; ky < K; ++ky)
      for (std::int64_t kx = 0; kx < K; ++kx) {
        T const* src = dcol + P * (kx + K * (ky + K * c));
        std::int64_t lo, hi;
        valid_range<S, Pad>(kx, g.w, g.ow, lo, hi);
        const std::int64_t off = kx - Pad;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * S - Pad + ky;
          if (iy < 0 || iy >= g.h) continue;
          T const* d = src + g.ow * oy;
          T* row = dx + g.w * (iy + g.h * c);
          for (std::int64_t ox = lo; ox < hi; ++ox) row[ox * S + off] += d[ox];
        }
      }
}

// A batch of n items split into at most max_chunks fixed, contiguous chunks.
struct chunking {
  static constexpr std::int64_t max_chunks = 16;
  std::int64_t n = 0, count = 0, per = 0;
  explicit chunking(std::int64_t items) noexcept : n(items) {
    count = std::min<std::int64_t>(items, max_chunks);
    per = count ? (items + count - 1) / count : 0;
    if (per) count = (items + per - 1) / per;
  }
  std::int64_t begin(std::int64_t chunk) const noexcept { return std::min(n, chunk * per); }
  std::int64_t end(std::int64_t chunk) const noexcept { return std::min(n, (chunk + 1) * per); }
};

// Runs f(chunk) for every chunk: on the backend's threads when the work (in flops or element
// touches) is worth it, else in order on the caller. Every chunk runs exactly once either way.
template <class F>
void run_chunks(chunking const& ch, double work, F&& f) {
  if (ch.count <= 1 || work < 5e5) {
    for (std::int64_t i = 0; i < ch.count; ++i) f(i);
    return;
  }
  nitro::detail::active_ops().parallel_for(static_cast<int>(ch.count), [&](int i) { f(static_cast<std::int64_t>(i)); });
}

}  // namespace nitro::nn::detail
