// nitro/tensor/ops/epilogue.hpp — the fusable activations' arithmetic on Eigen arrays, written once.
//
//   nitro::detail::epilogue_forward<nitro::epilogue_act::relu>(a);        // a = relu(a), in place
//   nitro::detail::epilogue_backward<nitro::epilogue_act::gelu>(g, z);    // g *= gelu'(z)
//
// The CPU backend's fused product (tensor/cpu/backend.hpp gemm_epilogue) and its convolution
// (tensor/cpu/conv.hpp) both call these, so the activation's definition is in one place. `yz` is the output y, or the
// pre-activation z where needs_preactivation(A).
#pragma once

#include "nitro/tensor/epilogue.hpp"
#include "nitro/tensor/ops/elementwise_eigen.hpp"  // gelu_fn: the exact GELU and its derivative

#include <type_traits>  // remove_cvref

namespace nitro::detail {

template <epilogue_act A, class X>
void epilogue_forward(X&& a) {
  using S = typename std::remove_cvref_t<X>::Scalar;
  if constexpr (A == epilogue_act::relu) a = a.max(S(0));
  else if constexpr (A == epilogue_act::tanh) a = a.tanh();
  else if constexpr (A == epilogue_act::sigmoid) a = a.logistic();
  else if constexpr (A == epilogue_act::gelu) a = gelu_fn::f(a);  // coefficient-wise: no aliasing
}

template <epilogue_act A, class G, class YZ>
void epilogue_backward(G&& g, YZ const& yz) {
  using S = typename std::remove_cvref_t<G>::Scalar;
  if constexpr (A == epilogue_act::relu) g = (yz > S(0)).select(g, S(0));
  else if constexpr (A == epilogue_act::tanh) g *= S(1) - yz.square();
  else if constexpr (A == epilogue_act::sigmoid) g *= yz * (S(1) - yz);
  else if constexpr (A == epilogue_act::gelu) g *= gelu_fn::df(yz, yz);
}

// The same with the activation known at run time (the kernels table's entry points).
template <class F>
void with_epilogue(epilogue_act a, F&& f) {
  switch (a) {
    case epilogue_act::identity: f(std::integral_constant<epilogue_act, epilogue_act::identity>{}); return;
    case epilogue_act::relu: f(std::integral_constant<epilogue_act, epilogue_act::relu>{}); return;
    case epilogue_act::tanh: f(std::integral_constant<epilogue_act, epilogue_act::tanh>{}); return;
    case epilogue_act::sigmoid: f(std::integral_constant<epilogue_act, epilogue_act::sigmoid>{}); return;
    case epilogue_act::gelu: f(std::integral_constant<epilogue_act, epilogue_act::gelu>{}); return;
  }
}

}  // namespace nitro::detail
