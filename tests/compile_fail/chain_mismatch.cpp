// Adjacent layers whose feature extents differ do not compile; the error names both layers.
// EXPECT: nitro::nn::layer_position<1>
// EXPECT: feeds_into<nitro::nn::dense_layer<784, 128
// EXPECT: nitro::nn::dense_layer<256, 10
// EXPECT: E-SHAPE-013
#include "common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::relu), nitro::nn::dense<256, 10>());
#else
  auto m = nitro::nn::chain(nitro::nn::dense<784, 256>(nitro::nn::relu), nitro::nn::dense<256, 10>());
#endif
  (void)m;
}
