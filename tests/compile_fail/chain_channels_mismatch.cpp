// A convolution that takes a different number of channels than the convolution before it produces
// (the pooling and the activation between keep the count) does not compile; the error names both
// layers and their positions in the chain.
// EXPECT: channels_from<nitro::nn::layer_position<1>, nitro::nn::conv2d_layer<1, 8,
// EXPECT: channels_into<nitro::nn::layer_position<4>, nitro::nn::conv2d_layer<16, 8,
// EXPECT: E-SHAPE-014
#include "common.hpp"

int main() {
  namespace nn = nitro::nn;
#ifdef NITRO_COMPILE_FAIL
  auto m = nn::chain(nn::conv2d<1, 8, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::relu, nn::conv2d<16, 8, 3, 1, 1>());
#else
  auto m = nn::chain(nn::conv2d<1, 8, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::relu, nn::conv2d<8, 8, 3, 1, 1>());
#endif
  (void)m;
}
