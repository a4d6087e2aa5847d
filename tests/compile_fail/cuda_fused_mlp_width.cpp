// Asking for the fused MLP kernel of a chain it cannot run does not compile; the error names the
// chain and the reason (here a width of 256: the fused kernel takes 16 to 128).
// EXPECT: fused_mlp_unsupported<
// EXPECT: width_outside_16_to_128<256
// EXPECT: E-CUDA-101
#include <nitro/nn/cuda/mlp_traits.hpp>

int main() {
#ifdef NITRO_COMPILE_FAIL
  using Model = decltype(nitro::nn::chain(nitro::nn::dense<784, 256>(nitro::nn::relu), nitro::nn::dense<256, 10>()));
#else
  using Model = decltype(nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::relu), nitro::nn::dense<128, 10>()));
#endif
  using Config = nitro::cuda::fused_mlp_config_t<Model>;
  static_assert(Config::width > 0);
}
