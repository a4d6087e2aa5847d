// A repeated block that changes the feature count cannot feed its next copy: the error names the
// count, the block and both extents.
// EXPECT: repeated_times<3>, nitro::nn::repeated_block<nitro::nn::dense_layer<64, 32
// EXPECT: block_features_in<64>, nitro::nn::block_features_out<32>
// EXPECT: E-SHAPE-016
#include "common.hpp"

int main() {
  namespace nn = nitro::nn;
#ifdef NITRO_COMPILE_FAIL
  auto m = nn::repeat<3>(nn::dense<64, 32>(nn::relu));
#else
  auto m = nn::chain(nn::repeat<3>(nn::dense<64, 64>(nn::relu)), nn::dense<64, 32>());
#endif
  (void)m;
}
