// nitro/nn/layers/pool.hpp — max and average pooling over K x K windows of WHCN images.
//
//   nitro::nn::max_pool<2>()      [28, 28, C, B] -> [14, 14, C, B]   (stride defaults to K)
//   nitro::nn::avg_pool<3, 2>()   window 3, stride 2
//
// No padding; the output is (in - K) / Stride + 1 wide and high (PyTorch's floor mode), every
// channel pooled on its own. max_pool's backward routes each output's gradient to the first
// largest input of its window (row by row); the winner's place in its window is kept, one byte
// per output, in the step's arena while a gradient is recorded (never the heap). avg_pool spreads
// each gradient evenly over the window.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/detail/spatial.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <bit>          // countr_zero
#include <cstdint>      // int64_t, uint8_t, uint32_t, uint64_t
#include <string>       // describe
#include <type_traits>  // conditional_t
#include <utility>      // pair

namespace nitro::nn {

enum class pool_kind { max, average };

template <class Layer, std::int64_t K, std::int64_t Stride>
struct pool_arguments_invalid {
  static_assert(always_false<Layer>,
                "E-LAYER-008: nitro::nn::max_pool<K, Stride> / avg_pool<K, Stride>: the window K and the stride must be "
                "positive. Fix: e.g. max_pool<2>() (stride 2) or avg_pool<3, 2>().");
  static constexpr bool ok = false;
};

template <pool_kind Kind, std::int64_t K, std::int64_t Stride = K>
struct pool_layer : stateless {
  static_assert(checks_evaluated<detail::require<pool_arguments_invalid<pool_layer, K, Stride>, (K > 0 && Stride > 0)>()>);
  static constexpr bool keeps_channels = true;  // chain compares the channels across it

  std::string describe() const {
    std::string s = std::string(Kind == pool_kind::max ? "max_pool<" : "avg_pool<") + std::to_string(K);
    if (Stride != K) s += ", " + std::to_string(Stride);
    return s + ">";
  }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    using namespace nitro::detail;
    const nn::detail::image_geometry geo = nn::detail::check_image(x.shape(), -1, K, Stride, 0, [&] { return describe(); });
    const std::int64_t planes = geo.c * geo.b, in_plane = geo.in_plane(), out_plane = geo.out_plane();
    basic_tensor<T> y = make_output<T>(shape{geo.ow, geo.oh, geo.c, geo.b}, needs_grad(x));
    // max with a gradient: each output's winner, as its position in the window, in the step's arena
    arg_t* arg = nullptr;
    if (Kind == pool_kind::max && y.requires_grad())
      arg = active_tape().memory().template allocate_n<arg_t>(static_cast<std::size_t>(planes * out_plane));
    T const* xd = x.data();
    T* yd = y.data();
    const double work = double(planes) * double(out_plane) * double(K * K);
    const nn::detail::chunking ch(planes);
    nn::detail::run_chunks(ch, work, [&](std::int64_t c) {
      for (std::int64_t p = ch.begin(c); p < ch.end(c); ++p) {
        if (arg) forward_plane<true>(xd + p * in_plane, geo, yd + p * out_plane, arg + p * out_plane);
        else forward_plane<false>(xd + p * in_plane, geo, yd + p * out_plane, nullptr);
      }
    });
    if (y.requires_grad()) {
      int xv = x.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        T* gx = t.grad<T>(xv);
        nn::detail::run_chunks(ch, work, [&](std::int64_t c) {
          for (std::int64_t p = ch.begin(c); p < ch.end(c); ++p)
            backward_plane(gy + p * out_plane, geo, gx + p * in_plane, arg ? arg + p * out_plane : nullptr);
        });
      });
    }
    return {y, st};
  }

 private:
  using arg_t = std::conditional_t<(K * K <= 256), std::uint8_t, std::uint32_t>;

  // Window by window, branch-free: the maximum by comparisons the compiler turns into max
  // instructions, then the first tap equal to it from a bit mask (K*K <= 64) — random data would
  // mispredict a branch per tap.
  template <bool WithArg, class T>
  static void forward_plane(T const* x, nn::detail::image_geometry const& g, T* y, arg_t* arg) {
    const std::int64_t w = g.w;
    for (std::int64_t oy = 0; oy < g.oh; ++oy) {
      T const* r = x + w * oy * Stride;  // the windows' top row; row ky is r + ky * w
      T* yr = y + g.ow * oy;
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        T const* q = r + ox * Stride;
        if constexpr (Kind == pool_kind::max) {
          T v[K * K];
          for (std::int64_t ky = 0; ky < K; ++ky)
            for (std::int64_t kx = 0; kx < K; ++kx) v[kx + K * ky] = q[kx + w * ky];
          T m = v[0];
          for (std::int64_t i = 1; i < K * K; ++i) m = v[i] > m ? v[i] : m;
          yr[ox] = m;
          if constexpr (WithArg) {
            if constexpr (K * K <= 64) {
              std::uint64_t hit = std::uint64_t(1) << (K * K - 1);  // (NaN windows: the last tap)
              for (std::int64_t i = 0; i < K * K; ++i) hit |= std::uint64_t(v[i] == m) << i;
              arg[ox + g.ow * oy] = static_cast<arg_t>(std::countr_zero(hit));
            } else {
              arg_t at = K * K - 1;
              for (std::int64_t i = K * K - 1; i >= 0; --i) at = v[i] == m ? static_cast<arg_t>(i) : at;
              arg[ox + g.ow * oy] = at;
            }
          }
        } else {
          T s = 0;
          for (std::int64_t ky = 0; ky < K; ++ky)
            for (std::int64_t kx = 0; kx < K; ++kx) s += q[kx + w * ky];
          yr[ox] = s * (T(1) / T(K * K));
        }
      }
    }
  }
  template <class T>
  static void backward_plane(T const* gy, nn::detail::image_geometry const& g, T* gx, arg_t const* arg) {
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        const std::int64_t o = ox + g.ow * oy, at = ox * Stride + g.w * oy * Stride;
        if constexpr (Kind == pool_kind::max) {
          gx[at + arg[o] % K + g.w * (arg[o] / K)] += gy[o];
        } else {
          const T v = gy[o] * (T(1) / T(K * K));
          for (std::int64_t ky = 0; ky < K; ++ky)
            for (std::int64_t kx = 0; kx < K; ++kx) gx[at + kx + g.w * ky] += v;
        }
      }
  }
};

template <std::int64_t K, std::int64_t Stride = K> using max_pool_layer = pool_layer<pool_kind::max, K, Stride>;
template <std::int64_t K, std::int64_t Stride = K> using avg_pool_layer = pool_layer<pool_kind::average, K, Stride>;

// max_pool<K, Stride = K>(): the largest value of each K x K window.
template <std::int64_t K, std::int64_t Stride = K>
constexpr max_pool_layer<K, Stride> max_pool() noexcept { return {}; }
// avg_pool<K, Stride = K>(): the mean of each K x K window.
template <std::int64_t K, std::int64_t Stride = K>
constexpr avg_pool_layer<K, Stride> avg_pool() noexcept { return {}; }

}  // namespace nitro::nn
