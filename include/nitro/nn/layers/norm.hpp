// nitro/nn/layers/norm.hpp — normalisation layers: layer_norm over features, batch_norm over the batch.
//
//   nitro::nn::layer_norm<F>()    x [F, ...]: each column (every index but the first) normalised over
//                                 its F features, then scaled and shifted per feature (weight, bias)
//   nitro::nn::batch_norm<C>()    x [C, B] (per feature) or [..., C, B] such as WHCN images (per
//                                 channel: the extent before the batch); weight, bias, and the
//                                 running statistics as state
//
// batch_norm follows PyTorch: in training mode it normalises with the batch's mean and (biased)
// variance and returns st_new whose running_mean / running_var moved toward the batch's mean and
// unbiased variance by `momentum` (0.1); in evaluation it normalises with the running statistics
// and returns st unchanged. eps defaults to 1e-5 in both layers. Each is one tape node whose
// backward is the closed form (the mean and 1/std per column or channel kept in the step's arena),
// both computed by the step's kernels (device_ops::layer_norm, batch_norm: the CPU's column loops
// or the GPU's kernels).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

struct layer_norm_options {
  double eps = 1e-5;
  init::initializer weight = init::ones;
  init::initializer bias = init::zeros;
};

template <std::int64_t F>
struct layer_norm_layer {
  static_assert(F > 0, "E-LAYER-014: nitro::nn::layer_norm<F> needs a positive feature extent. Fix: layer_norm<256>().");
  using param_spec = tree<entry<"weight", param<F>>, entry<"bias", param<F>>>;
  using state_spec = tree<>;
  static constexpr std::int64_t in_features = F;
  static constexpr std::int64_t out_features = F;

  layer_norm_options options{};

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const {
    options.weight(get<"weight">(ps), F, F, g);
    options.bias(get<"bias">(ps), F, F, g);
  }
  std::string describe() const { return "layer_norm<" + std::to_string(F) + ">"; }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps, tree<> const& st) const {
    using namespace nitro::detail;
    check_features(F, x.rank() == 0 ? 1 : x.size(0), [&] { return describe(); }, x.shape());
    const std::int64_t N = x.numel() / F;  // columns
    basic_tensor<T> const& w = get<"weight">(ps);
    basic_tensor<T> const& b = get<"bias">(ps);
    const bool grad = needs_grad(x, w, b);
    basic_tensor<T> y = make_output<T>(x.shape(), grad);
    // per column: mean and 1/std, kept for the backward pass
    T* stats = grad ? active_tape().memory().template allocate_n<T>(static_cast<std::size_t>(2 * N)) : nullptr;
    active_ops().layer_norm(F, N, options.eps, x.data(), w.data(), b.data(), y.data(), stats);
    if (grad) {
      T const* xd = x.data();
      T const* wd = w.data();
      int xv = x.var(), wv = w.var(), bv = b.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        active_ops().layer_norm_backward(F, N, xd, wd, stats, gy, xv >= 0 ? t.grad<T>(xv) : nullptr, wv >= 0 ? t.grad<T>(wv) : nullptr,
                                         bv >= 0 ? t.grad<T>(bv) : nullptr);
      });
    }
    return {y, st};
  }
};

struct batch_norm_options {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch statistic
  init::initializer weight = init::ones;
  init::initializer bias = init::zeros;
};

template <std::int64_t C>
struct batch_norm_layer {
  static_assert(C > 0, "E-LAYER-015: nitro::nn::batch_norm<C> needs a positive channel count. Fix: batch_norm<16>().");
  using param_spec = tree<entry<"weight", param<C>>, entry<"bias", param<C>>>;
  using state_spec = tree<entry<"running_mean", buffer<C>>, entry<"running_var", buffer<C>>>;
  // [C, B] has C features, but [W, H, C, B] has W*H*C: known at run time only
  static constexpr std::int64_t in_features = dynamic;
  static constexpr std::int64_t out_features = dynamic;
  static constexpr std::int64_t in_channels = C;
  static constexpr std::int64_t out_channels = C;

  batch_norm_options options{};

  template <class Ps, class St>
  void init(Ps& ps, St& st, rng& g) const {
    options.weight(get<"weight">(ps), C, C, g);
    options.bias(get<"bias">(ps), C, C, g);
    init::zeros(get<"running_mean">(st), C, C, g);
    init::ones(get<"running_var">(st), C, C, g);
  }
  std::string describe() const { return "batch_norm<" + std::to_string(C) + ">"; }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    using namespace nitro::detail;
    const shape& s = x.shape();
    if (s.rank() < 2)
      throw error("E-LAYER-001", describe() + " takes [channels, batch] or [..., channels, batch], got a tensor of shape " + s.to_string(),
                  "keep the batch dimension last and the channels just before it");
    if (s[s.rank() - 2] != C)
      throw error("E-LAYER-002",
                  describe() + " expects " + std::to_string(C) + " channels (the extent before the batch), got " +
                      std::to_string(s[s.rank() - 2]) + " (input shape " + s.to_string() + ")",
                  "make the previous layer produce " + std::to_string(C) + " channels, or change batch_norm<" + std::to_string(C) + ">");
    std::int64_t inner = 1;
    for (int d = 0; d < s.rank() - 2; ++d) inner *= s[d];
    const std::int64_t B = s.batch(), M = inner * B;  // values per channel
    const bool training = training_mode();
    if (training && M < 2)
      throw error("E-LAYER-006",
                  describe() + " in training mode needs more than one value per channel to estimate a variance, got input shape " +
                      s.to_string(),
                  "train with a batch of at least 2 samples (or evaluate, which uses the running statistics)");

    basic_tensor<T> const& w = get<"weight">(ps);
    basic_tensor<T> const& b = get<"bias">(ps);
    basic_tensor<T> const& rm = get<"running_mean">(st);
    basic_tensor<T> const& rv = get<"running_var">(st);
    const bool grad = needs_grad(x, w, b);
    basic_tensor<T> y = make_output<T>(s, grad);
    params_t<state_spec, T> st_new = st;
    // per channel: the mean and 1/std used, in the step's memory
    basic_tensor<T> stats = basic_tensor<T>::empty(shape{2, C});
    T* nm = nullptr;
    T* nv = nullptr;
    if (training) {
      get<"running_mean">(st_new) = basic_tensor<T>::empty(shape{C});
      get<"running_var">(st_new) = basic_tensor<T>::empty(shape{C});
      nm = get<"running_mean">(st_new).data();
      nv = get<"running_var">(st_new).data();
    }
    active_ops().batch_norm(training, inner, C, B, options.eps, options.momentum, x.data(), w.data(), b.data(), rm.data(), rv.data(),
                            stats.data(), nm, nv, y.data());
    if (grad) {
      T const* xd = x.data();
      T const* wd = w.data();
      T const* sd = stats.data();
      int xv = x.var(), wv = w.var(), bv = b.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        active_ops().batch_norm_backward(training, inner, C, B, xd, wd, sd, gy, xv >= 0 ? t.grad<T>(xv) : nullptr,
                                         wv >= 0 ? t.grad<T>(wv) : nullptr, bv >= 0 ? t.grad<T>(bv) : nullptr);
      });
    }
    return {y, training ? st_new : st};
  }
};

// layer_norm<F>(options): normalises each column over its F features (eps 1e-5).
template <std::int64_t F>
constexpr layer_norm_layer<F> layer_norm(layer_norm_options options = {}) { return layer_norm_layer<F>{options}; }
// batch_norm<C>(options): per channel (the extent before the batch); momentum 0.1, eps 1e-5.
template <std::int64_t C>
constexpr batch_norm_layer<C> batch_norm(batch_norm_options options = {}) { return batch_norm_layer<C>{options}; }

}  // namespace nitro::nn
