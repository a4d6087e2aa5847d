// nitro/train/device_params.hpp — the parameters and the model's state where the backend computes.
//
//   device_params<Params, State> d(backend.ops().memory(), two_pass);
//   d.upload(params, state);                          // before a step, an evaluation, a prediction
//   auto ps = d.view(tape, d.grads());                // what forward reads, backward accumulates into
//   d.download(d.grads(), params.grads());            // at the step's last micro-batch
//
// The handle's param_store and state store stay in host memory and stay the run's master copy: the
// optimizer program, clipping, SAM's perturbation, the EMA, checkpoints, averaging and the
// data-parallel sums read and write them exactly as on the CPU. When the backend's memory is not the
// host's, forward and backward cannot read host buffers, so this keeps a copy of both stores in the
// backend's memory, in the same flat layout (one copy moves a whole store), with the gradient
// buffer the tape accumulates into (and SAM's first-pass buffer). What crosses, and when: the values
// to the device before each step's first micro-batch (with SAM, each micro-batch, and again at
// w + e), evaluation and prediction; the state before each micro-batch; the gradients to
// the host once per optimizer step; a training forward's new state to the host leaf by leaf. Each
// crossing is counted. On a backend whose memory is the host's it holds nothing, and every view is
// the store's own: the CPU's step is untouched.
#pragma once

#include "nitro/core/tree.hpp"
#include "nitro/tensor/device.hpp"
#include "nitro/tensor/memory.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <cstddef>  // size_t
#include <cstdint>  // int64_t

namespace nitro::detail {

template <class Params, class State>
class device_params {
 public:
  using ps_type = typename Params::tree_type;
  using st_type = typename State::tree_type;

  // A copy in `memory` when it is a device's; with `two_pass`, also SAM's first-pass gradient.
  device_params(device_memory& memory, bool two_pass) : m_mem(memory.device() == device_kind::cpu ? nullptr : &memory) {
    if (!m_mem) return;
    m_values = allocate(Params::size);
    m_grads = allocate(Params::size);
    if (two_pass) m_first = allocate(Params::size);
    m_state = allocate(State::size);
  }
  ~device_params() {
    if (!m_mem) return;
    release(m_values, Params::size);
    release(m_grads, Params::size);
    release(m_first, Params::size);
    release(m_state, State::size);
  }
  device_params(device_params const&) = delete;
  device_params& operator=(device_params const&) = delete;

  // Whether the stores have a copy on a device (false on the CPU).
  bool on_device() const noexcept { return m_mem != nullptr; }
  float* grads() noexcept { return m_grads; }
  float* first_pass_grads() noexcept { return m_first; }

  // The host's values and the model's state to the device, each one copy; `with_values` false
  // sends the state alone (a later micro-batch of a step: the values have not changed since).
  void upload(Params const& params, State const& state, bool with_values = true, bool with_state = true) {
    if (with_values) {
      m_mem->copy_from_host(m_values, params.values(), bytes(Params::size));
      ++m_uploads;
    }
    if (with_state && State::size > 0) {
      m_mem->copy_from_host(m_state, state.values(), bytes(State::size));
      ++m_uploads;
    }
  }
  void zero(float* grads) { m_mem->zero(grads, bytes(Params::size)); }
  // A device gradient buffer (grads() or first_pass_grads()) into a host one of the same layout.
  void download(float const* grads, float* host) {
    m_mem->copy_to_host(host, grads, bytes(Params::size));
    ++m_downloads;
  }
  // The trees forward reads: the device copy, its leaves saying where they live.
  ps_type view(tape& tp, float* grads) { return Params::view_of(m_values, &tp, grads, m_mem); }
  ps_type view() const { return Params::view_of(m_values, nullptr, nullptr, m_mem); }
  st_type state_view() const { return State::view_of(m_state, nullptr, nullptr, m_mem); }

  // A training forward's new state into the host store: each leaf that is not the store's own,
  // read back from wherever it was made (the step arena's device, or the host).
  void keep_state(State& host, st_type const& fresh) {
    std::size_t i = 0;
    for_each_leaf(fresh, [&](auto, basic_tensor<float> const& leaf) {
      auto const& li = State::leaves[i++];
      if (!leaf.defined() || leaf.data() == m_state + li.offset || leaf.data() == host.values() + li.offset) return;
      const std::size_t n = bytes(li.numel);
      if (device_memory* m = leaf.memory()) {
        m->copy_to_host(host.values() + li.offset, leaf.data(), n);
        ++m_downloads;
      } else {
        host_memory::instance().copy_to_host(host.values() + li.offset, leaf.data(), n);
      }
    });
  }

  // The crossings so far: stores sent to the device, gradients and state leaves read back.
  std::int64_t uploads() const noexcept { return m_uploads; }
  std::int64_t downloads() const noexcept { return m_downloads; }

 private:
  static constexpr std::size_t bytes(std::int64_t n) noexcept { return sizeof(float) * static_cast<std::size_t>(n); }
  static constexpr std::size_t allocated(std::int64_t n) noexcept { return (bytes(n > 0 ? n : 1) + 63) / 64 * 64; }
  float* allocate(std::int64_t n) {
    auto* p = static_cast<float*>(m_mem->allocate(allocated(n), 64));
    m_mem->zero(p, allocated(n));
    return p;
  }
  void release(float* p, std::int64_t n) noexcept {
    if (p) m_mem->deallocate(p, allocated(n));
  }

  device_memory* m_mem = nullptr;  // null: the host's memory, nothing copied
  float* m_values = nullptr;
  float* m_grads = nullptr;
  float* m_first = nullptr;
  float* m_state = nullptr;
  std::int64_t m_uploads = 0, m_downloads = 0;
};

}  // namespace nitro::detail
