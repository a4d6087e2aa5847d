// nitro/nn/init.hpp — seeded initialisers: Kaiming, Glorot, uniform, normal, constants.
//
// An initialiser fills a parameter given its fan-in and fan-out. Dense weights [out, in] have
// fan_in = in, fan_out = out; convolution weights [kw, kh, cin, cout] have fan_in = kw*kh*cin.
// The defaults match PyTorch's nn.Linear and nn.Conv2d (Kaiming-uniform with a = sqrt(5), i.e.
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for weights and biases), so the same model starts alike.
#pragma once

#include "nitro/core/rng.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/tensor/tensor.hpp"

#include <cmath>    // sqrt
#include <cstdint>  // int64_t
#include <string>   // describe

namespace nitro::init {

enum class kind { zeros, ones, constant, uniform, normal, kaiming_uniform, kaiming_normal, glorot_uniform, glorot_normal, torch_default };

struct initializer {
  init::kind kind = init::kind::torch_default;
  double value = 0;  // constant value, uniform half-width, normal std, or Kaiming's negative slope a

  template <class T>
  void operator()(basic_tensor<T>& t, std::int64_t fan_in, std::int64_t fan_out, rng& g) const;
  std::string describe() const {
    switch (kind) {
      case init::kind::zeros: return "zeros";
      case init::kind::ones: return "ones";
      case init::kind::constant: return "constant(" + std::to_string(value) + ")";
      case init::kind::uniform: return "uniform(" + std::to_string(value) + ")";
      case init::kind::normal: return "normal(" + std::to_string(value) + ")";
      case init::kind::kaiming_uniform: return "kaiming_uniform";
      case init::kind::kaiming_normal: return "kaiming_normal";
      case init::kind::glorot_uniform: return "glorot_uniform";
      case init::kind::glorot_normal: return "glorot_normal";
      case init::kind::torch_default: return "torch_default";
    }
    return "?";
  }
};

// Fills a tensor: defined here for every scalar type, compiled once for float in nitro::runtime.
template <class T>
void initializer::operator()(basic_tensor<T>& t, std::int64_t fan_in, std::int64_t fan_out, rng& g) const {
  const std::int64_t n = t.numel();
  T* p = t.data();
  auto uniform = [&](double a) { for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(g.uniform(-a, a)); };
  auto normal = [&](double s) { for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s * g.normal()); };
  const double fi = double(fan_in > 0 ? fan_in : 1), fo = double(fan_out > 0 ? fan_out : 1);
  switch (kind) {
    case init::kind::zeros: for (std::int64_t i = 0; i < n; ++i) p[i] = T(0); break;
    case init::kind::ones: for (std::int64_t i = 0; i < n; ++i) p[i] = T(1); break;
    case init::kind::constant: for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value); break;
    case init::kind::uniform: uniform(value); break;
    case init::kind::normal: normal(value); break;
    case init::kind::kaiming_uniform: uniform(std::sqrt(2.0 / (1.0 + value * value)) * std::sqrt(3.0 / fi)); break;
    case init::kind::kaiming_normal: normal(std::sqrt(2.0 / (1.0 + value * value)) / std::sqrt(fi)); break;
    case init::kind::glorot_uniform: uniform(std::sqrt(6.0 / (fi + fo))); break;
    case init::kind::glorot_normal: normal(std::sqrt(2.0 / (fi + fo))); break;
    case init::kind::torch_default: uniform(1.0 / std::sqrt(fi)); break;
  }
}
#if NITRO_RUNTIME_EXTERN
extern template void initializer::operator()<float>(basic_tensor<float>&, std::int64_t, std::int64_t, rng&) const;
#endif

inline constexpr initializer zeros{kind::zeros, 0};
inline constexpr initializer ones{kind::ones, 0};
inline constexpr initializer kaiming_uniform{kind::kaiming_uniform, 0};
inline constexpr initializer kaiming_normal{kind::kaiming_normal, 0};
inline constexpr initializer glorot_uniform{kind::glorot_uniform, 0};
inline constexpr initializer glorot_normal{kind::glorot_normal, 0};
inline constexpr initializer torch_default{kind::torch_default, 0};
constexpr initializer constant(double v) noexcept { return {kind::constant, v}; }
constexpr initializer uniform(double half_width) noexcept { return {kind::uniform, half_width}; }
constexpr initializer normal(double std) noexcept { return {kind::normal, std}; }

}  // namespace nitro::init
