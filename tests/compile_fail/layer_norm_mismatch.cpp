// A layer_norm whose feature extent differs from the layer before it does not compile; the error
// names both layers (the chain compares static feature extents of neighbours).
// EXPECT: nitro::nn::layer_position<1>
// EXPECT: feeds_into<nitro::nn::dense_layer<784, 128
// EXPECT: nitro::nn::layer_norm_layer<256>
// EXPECT: E-SHAPE-013
#include "common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::relu), nitro::nn::layer_norm<256>(), nitro::nn::dense<256, 10>());
#else
  auto m = nitro::nn::chain(nitro::nn::dense<784, 256>(nitro::nn::relu), nitro::nn::layer_norm<256>(), nitro::nn::dense<256, 10>());
#endif
  (void)m;
}
