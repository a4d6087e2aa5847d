// nitro/nn/layers/flatten.hpp — the layer that turns images into feature columns.
//
//   nitro::nn::flatten     [w, h, c, B] -> [w*h*c, B]   (any rank: every extent but the batch)
//
// A view: the output shares the input's memory and its tape variable, so it costs nothing and its
// gradient is the input's. Between a convolution and a dense layer, flatten states the intent; a
// dense layer would read [w, h, c, B] as [w*h*c, B] by itself.
#pragma once

#include "nitro/nn/layer.hpp"
#include "nitro/tensor/ops/shape_ops.hpp"

#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

struct flatten_t : stateless {
  std::string describe() const { return "flatten"; }
  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    return {nitro::flatten(x), st};
  }
};

inline constexpr flatten_t flatten{};

}  // namespace nitro::nn
