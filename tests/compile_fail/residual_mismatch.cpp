// A residual body that changes the feature count does not compile: x + f(x) has no meaning; the
// error names the body and both extents.
// EXPECT: residual_body<nitro::nn::chain_layer<nitro::nn::layer_norm_layer<256>, nitro::nn::dense_layer<256, 128
// EXPECT: features_in<256>, nitro::nn::features_out<128>
// EXPECT: E-SHAPE-015
#include "common.hpp"

int main() {
  namespace nn = nitro::nn;
#ifdef NITRO_COMPILE_FAIL
  auto m = nn::residual(nn::chain(nn::layer_norm<256>(), nn::dense<256, 128>(nn::gelu)));
#else
  auto m = nn::residual(nn::chain(nn::layer_norm<256>(), nn::dense<256, 256>(nn::gelu)));
#endif
  (void)m;
}
