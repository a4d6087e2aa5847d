// nitro/nn/layers/pool.hpp — max and average pooling over K x K windows of WHCN images.
//
//   nitro::nn::max_pool<2>()      [28, 28, C, B] -> [14, 14, C, B]   (stride defaults to K)
//   nitro::nn::avg_pool<3, 2>()   window 3, stride 2
//
// No padding; the output is (in - K) / Stride + 1 wide and high (PyTorch's floor mode), every
// channel pooled on its own. max_pool's backward routes each output's gradient to the first
// largest input of its window (row by row); the winner's place in its window is kept, one word per
// output, in the step's arena while a gradient is recorded (never the heap). avg_pool spreads each
// gradient evenly over the window. Both run on the step's kernels (device_ops::pool2d: the CPU's
// plane loops, tensor/cpu/pooling.hpp, or the GPU's kernels).
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/detail/spatial.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/pooling.hpp"

#include <cstdint>  // int64_t, uint32_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

using nitro::pool_kind;  // max, average (tensor/pooling.hpp)

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
    const pool_window p{K, Stride, geo.w, geo.h, geo.ow, geo.oh, geo.c * geo.b};
    basic_tensor<T> y = make_output<T>(shape{geo.ow, geo.oh, geo.c, geo.b}, needs_grad(x));
    // max with a gradient: each output's winner, as its place in the window, in the step's arena
    std::uint32_t* arg = nullptr;
    if (Kind == pool_kind::max && y.requires_grad())
      arg = active_tape().memory().template allocate_n<std::uint32_t>(static_cast<std::size_t>(p.planes * p.out_plane()));
    active_ops().pool2d(Kind, p, x.data(), y.data(), arg);
    if (y.requires_grad()) {
      int xv = x.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        active_ops().pool2d_backward(Kind, p, gy, arg, t.grad<T>(xv));
      });
    }
    return {y, st};
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
