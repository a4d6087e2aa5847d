// nitro/nn/layers/pool.hpp — max and average pooling over K x K windows of WHCN images.
//
//   nitro::nn::max_pool<2>()      [28, 28, C, B] -> [14, 14, C, B]   (stride defaults to K)
//   nitro::nn::avg_pool<3, 2>()   window 3, stride 2
//
// No padding; the output is (in - K) / Stride + 1 wide and high (PyTorch's floor mode), every
// channel pooled on its own. max_pool's backward routes each output's gradient to the first
// largest input of its window (row by row), found again from the input and the output rather than
// kept: nothing is allocated. avg_pool spreads each gradient evenly over the window.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/detail/spatial.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

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
  static_assert(detail::require<pool_arguments_invalid<pool_layer, K, Stride>, (K > 0 && Stride > 0)>());

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
    T const* xd = x.data();
    T* yd = y.data();
    const double work = double(planes) * double(out_plane) * double(K * K);
    const nn::detail::chunking ch(planes);
    nn::detail::run_chunks(ch, work, [&](std::int64_t c) {
      for (std::int64_t p = ch.begin(c); p < ch.end(c); ++p) forward_plane(xd + p * in_plane, geo, yd + p * out_plane);
    });
    if (y.requires_grad()) {
      int xv = x.var(), yv = y.var();
      T const* ycd = yd;
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        T* gx = t.grad<T>(xv);
        nn::detail::run_chunks(ch, work, [&](std::int64_t c) {
          for (std::int64_t p = ch.begin(c); p < ch.end(c); ++p)
            backward_plane(xd + p * in_plane, ycd + p * out_plane, gy + p * out_plane, geo, gx + p * in_plane);
        });
      });
    }
    return {y, st};
  }

 private:
  template <class T>
  static void forward_plane(T const* x, nn::detail::image_geometry const& g, T* y) {
    for (std::int64_t oy = 0; oy < g.oh; ++oy) {
      T const* r = x + g.w * oy * Stride;  // the window's top row; row ky is r + ky * w
      T* yr = y + g.ow * oy;
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        T const* q = r + ox * Stride;
        if constexpr (Kind == pool_kind::max) {
          T m = q[0];
          for (std::int64_t ky = 0; ky < K; ++ky)
            for (std::int64_t kx = 0; kx < K; ++kx) m = q[kx + g.w * ky] > m ? q[kx + g.w * ky] : m;
          yr[ox] = m;
        } else {
          T s = 0;
          for (std::int64_t ky = 0; ky < K; ++ky)
            for (std::int64_t kx = 0; kx < K; ++kx) s += q[kx + g.w * ky];
          yr[ox] = s * (T(1) / T(K * K));
        }
      }
    }
  }
  // max: the gradient goes to the first element of the window (row by row) that equals the
  // window's maximum — found again here rather than kept from the forward pass
  template <class T>
  static void backward_plane(T const* x, T const* y, T const* gy, nn::detail::image_geometry const& g, T* gx) {
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        const std::int64_t o = ox + g.ow * oy, at = ox * Stride + g.w * oy * Stride;
        if constexpr (Kind == pool_kind::max) {
          std::int64_t best = at;
          for (std::int64_t i = 0; i < K * K; ++i) {
            const std::int64_t j = at + i % K + g.w * (i / K);
            if (x[j] == y[o]) { best = j; break; }
          }
          gx[best] += gy[o];
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
