// The device program runs models made of dense layers; another layer in the chain does not compile,
// and the error names the model and that layer.
// EXPECT: dense_program_needs_dense_layers<
// EXPECT: not_a_dense_layer<nitro::nn::softmax_t>
// EXPECT: E-CUDA-102
#include <nitro/nn/cuda/mlp_traits.hpp>

int main() {
#ifdef NITRO_COMPILE_FAIL
  using Model = decltype(nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>(), nitro::nn::softmax));
#else
  using Model = decltype(nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>()));
#endif
  static_assert(nitro::cuda::require_dense_model<Model>());
}
