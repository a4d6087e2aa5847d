// A convolution with a kernel of size 0 (or a stride of 0, or negative padding) does not compile;
// the error names the layer with its arguments.
// EXPECT: conv2d_arguments_invalid<nitro::nn::conv2d_layer<1, 8, 0, 1, 0
// EXPECT: E-LAYER-008
#include "common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::nn::conv2d<1, 8, 0>();
#else
  auto m = nitro::nn::conv2d<1, 8, 1>();
#endif
  (void)m;
}
