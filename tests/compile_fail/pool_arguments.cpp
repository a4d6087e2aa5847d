// A pooling window or stride of 0 does not compile; the error names the layer with its arguments.
// EXPECT: pool_arguments_invalid<nitro::nn::pool_layer<nitro::pool_kind::max, 2, 0>
// EXPECT: E-LAYER-008
#include "common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::nn::max_pool<2, 0>();
#else
  auto m = nitro::nn::max_pool<2, 1>();
#endif
  (void)m;
}
