// nitro/tensor/backend.hpp — the Backend concept: what the trainer asks of the machine that runs a step.
//
//   static_assert(nitro::Backend<nitro::cpu_backend>);
//   nitro::detail::active_ops().gemm(...);   // an op's product, on the backend of the running step
//
// A backend is a run's choice (the handle's `device` construction fact), never a second trainer. It
// has a device kind and a name (recorded in the manifest and show()), `to_device(field, tensor)` —
// the one door batch fields pass through, counted — and `ops()`, the kernels table (device_ops.hpp)
// that the handle installs in every step and evaluation context, so layers, losses and ops reach the
// backend through the context and never name one. Memory inside a step comes from the context's
// arena (tensor/tape.hpp), whichever backend runs it.
#pragma once

#include "nitro/tensor/cpu/backend.hpp"
#include "nitro/tensor/device_ops.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <concepts>     // convertible_to, same_as
#include <string_view>  // field names

namespace nitro {

template <class B>
concept Backend = requires(B& b, B const& cb, std::string_view field, basic_tensor<float> const& host) {
  { B::device } -> std::convertible_to<device_kind>;
  { cb.name() } -> std::convertible_to<char const*>;
  { b.to_device(field, host) } -> std::same_as<basic_tensor<float>>;
  { cb.ops() } -> std::same_as<device_ops&>;
};
static_assert(Backend<cpu_backend>, "nitro invariant: cpu_backend models the Backend concept");

// The backend a `device` value makes: a Backend is its own; nitro::cuda_device{} makes the
// nitro::cuda_backend that nitro/cuda.cuh defines (cuda_backend_of, specialised there).
template <class Tag>
struct cuda_backend_of {};
template <class V>
struct backend_of {
  using type = V;
  static V make(V const& v) { return v; }
};
template <class Tag>
inline constexpr bool cuda_backend_compiled_in = requires { typename cuda_backend_of<Tag>::type; };
template <class V>
  requires std::same_as<V, cuda_device>
struct backend_of<V> {
  static_assert(cuda_backend_compiled_in<V>,
                "E-CUDA-106: nitro::device = nitro::cuda_device{} asks for the CUDA backend, but this translation unit has none: "
                "it was not compiled by nvcc with <nitro/cuda.cuh>. Fix: compile the trainer as CUDA (a .cu file, or "
                "set_source_files_properties(trainer.cpp PROPERTIES LANGUAGE CUDA)), include <nitro/cuda.cuh> and link nitro::cuda; "
                "or leave device at the CPU.");
  using type = typename cuda_backend_of<V>::type;
  static type make(V const& v) { return type(v.index); }
};
template <class V>
using backend_of_t = typename backend_of<V>::type;
// What nitro::device accepts: a backend, or a value that makes one.
template <class V>
concept backend_choice = Backend<V> || std::same_as<V, cuda_device>;

namespace detail {
// The kernels of the step (or evaluation) running on this thread; the CPU's outside one.
inline device_ops& active_ops() noexcept {
  step_context* c = current_context();
  return c && c->ops ? *c->ops : cpu::ops::instance();
}
}  // namespace detail

}  // namespace nitro
