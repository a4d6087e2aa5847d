// nitro/tensor/epilogue.hpp — what a product's epilogue applies: the activations a backend fuses.
//
//   ops.gemm_epilogue(..., bias, nitro::epilogue_act::relu, z, c, ldc);   // c = relu(A B + bias)
//
// The names of the fusable activations as the kernels table (device_ops.hpp) sees them; each
// activation of nn/layers/activation.hpp says which one it is. The arithmetic (for Eigen arrays) is
// tensor/ops/epilogue.hpp; the CUDA backend maps these to cuBLASLt's epilogues.
#pragma once

namespace nitro {

enum class epilogue_act : unsigned char { identity, relu, tanh, sigmoid, gelu };

// The derivative of gelu reads the pre-activation z; the others read their output y.
constexpr bool needs_preactivation(epilogue_act a) noexcept { return a == epilogue_act::gelu; }

constexpr char const* to_string(epilogue_act a) noexcept {
  switch (a) {
    case epilogue_act::identity: return "identity";
    case epilogue_act::relu: return "relu";
    case epilogue_act::tanh: return "tanh";
    case epilogue_act::sigmoid: return "sigmoid";
    case epilogue_act::gelu: return "gelu";
  }
  return "?";
}

}  // namespace nitro
