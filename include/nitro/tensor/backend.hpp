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

namespace detail {
// The kernels of the step (or evaluation) running on this thread; the CPU's outside one.
inline device_ops& active_ops() noexcept {
  step_context* c = current_context();
  return c && c->ops ? *c->ops : cpu::ops::instance();
}
}  // namespace detail

}  // namespace nitro
