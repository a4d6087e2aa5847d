// bench/bench_cnn.hpp — the CNN of examples/fashion_cnn.cpp (channels = 32) as a benchmarked
// experiment of bench/train_nitro.cpp: conv 3x3 1->32 relu, max_pool 2, conv 3x3 32->64 relu,
// max_pool 2, flatten, dense 3136->128 relu, dense 128->10. Included by train_nitro.cpp.
#pragma once

namespace bench {

struct Cnn {
  nitro::GraphConst<int, 32> channels;
  NITRO_BENCH_COMMON_MEMBERS
  auto build_model() const {
    namespace nn = nitro::nn;
    constexpr int C = decltype(channels)::value;
    return nn::chain(nn::conv2d<1, C, 3, 1, 1>(nn::relu), nn::max_pool<2>(),
                     nn::conv2d<C, 2 * C, 3, 1, 1>(nn::relu), nn::max_pool<2>(),
                     nn::flatten,
                     nn::dense<49 * 2 * C, 128>(nn::relu), nn::dense<128, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  // per sample: forward 2 * (output pixels x out channels x 9 in channels) per convolution and
  // 2 * in * out per dense layer; the weight gradients the same; input gradients for all but the
  // first convolution
  static constexpr double conv1 = 2.0 * 784 * 32 * 9, conv2 = 2.0 * 196 * 64 * 288, fc1 = 2.0 * 3136 * 128, fc2 = 2.0 * 128 * 10;
  static constexpr double flops_per_sample = 2 * (conv1 + conv2 + fc1 + fc2) + conv2 + fc1 + fc2;
};
NITRO_EXPERIMENT(Cnn, channels, smoothing, lr, max_epochs, batch_size, train_limit);

}  // namespace bench
