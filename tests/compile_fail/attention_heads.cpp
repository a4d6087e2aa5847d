// Heads that do not divide the width do not compile: the error names the width and the heads.
// EXPECT: attention_width<256>, nitro::nn::attention_heads<3>
// EXPECT: E-LAYER-021
#include "common.hpp"

int main() {
  namespace nn = nitro::nn;
#ifdef NITRO_COMPILE_FAIL
  auto m = nn::chain(nn::layer_norm<256>(), nn::causal_self_attention<256, 3>());
#else
  auto m = nn::chain(nn::layer_norm<256>(), nn::causal_self_attention<256, 4>());
#endif
  (void)m;
}
