// An activation a convolution cannot fuse (softmax normalises over features, not per element) does
// not compile; the error names the layer and the activation, and the fix.
// EXPECT: activation_arg<nitro::nn::conv2d_layer<1, 8, 3, 1, 1, nitro::nn::softmax_t
// EXPECT: nitro::nn::softmax_t>
// EXPECT: E-LAYER-007
#include "common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::nn::chain(nitro::nn::conv2d<1, 8, 3, 1, 1>(nitro::nn::softmax), nitro::nn::flatten);
#else
  auto m = nitro::nn::chain(nitro::nn::conv2d<1, 8, 3, 1, 1>(nitro::nn::relu), nitro::nn::flatten, nitro::nn::softmax);
#endif
  (void)m;
}
