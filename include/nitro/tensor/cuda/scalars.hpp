// nitro/tensor/cuda/scalars.hpp — the device-scalar block as kernels read it.
//
//   nitro::cuda::scalar_ref lr = scalar_ref::constant(1e-3);          // a number baked into the launch
//   nitro::cuda::scalar_ref s  = device_scalar<FashionMLP<128>>("smoothing");   // slot of a Device field
//   float v = s.read(block);                                           // in a kernel: the current value
//
// The handle keeps an experiment's Device fields in one block of 8-byte slots, in the order the
// fields are declared (one slot each, the value in the slot's first bytes). A kernel never receives
// the value of a Device field or a schedule: it receives the slot and reads the mirrored block on
// the device when it runs, so a schedule or set_device between steps changes what the next step
// computes with no recompile and no host synchronisation (the CUDA backend copies the block with
// the step's other work, in stream order). Scheduled optimizer values (eta, ...) use further slots
// of the same kind: `scalar_block` below owns such a block.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/tensor/cuda/hd.hpp"

#include <cstddef>      // size_t
#include <cstdint>      // int32_t, int64_t
#include <cstring>      // memcpy
#include <limits>       // quiet_NaN
#include <memory>       // the block
#include <string>       // messages
#include <string_view>  // field names
#include <type_traits>  // is_same

namespace nitro::cuda {

enum class scalar_type : unsigned char { f32, f64, i32, i64, u8 };

template <class V>
constexpr scalar_type scalar_type_of() {
  if constexpr (std::is_same_v<V, double>) return scalar_type::f64;
  else if constexpr (std::is_same_v<V, float>) return scalar_type::f32;
  else if constexpr (std::is_integral_v<V> && sizeof(V) == 8) return scalar_type::i64;
  else if constexpr (std::is_integral_v<V> && sizeof(V) == 1) return scalar_type::u8;
  else return scalar_type::i32;
}

inline constexpr std::size_t scalar_slot_bytes = 8;

// Where one value comes from: slot `slot` of the block, or (slot < 0) the constant `value`.
struct scalar_ref {
  int slot = -1;
  scalar_type type = scalar_type::f32;
  double value = 0;

  static constexpr scalar_ref constant(double v) noexcept { return scalar_ref{-1, scalar_type::f64, v}; }
  static constexpr scalar_ref at(int slot, scalar_type t) noexcept { return scalar_ref{slot, t, 0}; }
  constexpr bool is_constant() const noexcept { return slot < 0; }

  // A slot read where no block was mirrored is NaN, never a plausible 0: a launch before the first
  // mirror_scalars shows in the loss and the divergence check instead of training on a zero.
  NITRO_HD_INLINE double read(void const* block) const {
    if (slot < 0) return value;
    if (block == nullptr) return std::numeric_limits<double>::quiet_NaN();
    unsigned char const* b = static_cast<unsigned char const*>(block) + scalar_slot_bytes * static_cast<std::size_t>(slot);
    switch (type) {
      case scalar_type::f32: { float f; std::memcpy(&f, b, sizeof f); return f; }
      case scalar_type::f64: { double d; std::memcpy(&d, b, sizeof d); return d; }
      case scalar_type::i32: { std::int32_t i; std::memcpy(&i, b, sizeof i); return static_cast<double>(i); }
      case scalar_type::i64: { std::int64_t i; std::memcpy(&i, b, sizeof i); return static_cast<double>(i); }
      case scalar_type::u8: return static_cast<double>(b[0]);
    }
    return value;
  }
};

// ---- the slots of an experiment's Device fields -------------------------------------------------------
template <experiment E>
constexpr std::size_t device_field_count() {
  std::size_t n = 0;
  for_each_field<E>([&](auto d) { if constexpr (decltype(d)::residency == residency::device) ++n; });
  return n;
}

// The slot of the Device field `name` (declaration order among Device fields), -1 when E has none.
template <experiment E>
constexpr int device_slot(std::string_view name) {
  int i = 0, found = -1;
  for_each_field<E>([&](auto d) {
    using D = decltype(d);
    if constexpr (D::residency == residency::device) {
      if (found < 0 && D::name.view() == name) found = i;
      ++i;
    }
  });
  return found;
}

// A reference to the Device field `name`; E-CUDA-010 when it is not one.
template <experiment E>
scalar_ref device_scalar(std::string_view name) {
  scalar_ref r;
  bool seen = false;
  for_each_field<E>([&](auto d) {
    using D = decltype(d);
    if (seen || D::name.view() != name) return;
    seen = true;
    if constexpr (D::residency == residency::device) r = scalar_ref::at(device_slot<E>(name), scalar_type_of<typename D::type::value_type>());
    else
      throw error("E-CUDA-010", "'" + std::string(name) + "' is a " + to_string(D::residency) + " field; a kernel reads only Device fields",
                  "declare it nitro::Device<T> to read it on the device");
  });
  if (!seen)
    throw error("E-CUDA-010", "the experiment has no field called '" + std::string(name) + "'", "name one of its nitro::Device<T> fields");
  return r;
}

// ---- a block of slots on the host --------------------------------------------------------------------
// The handle's layout: the experiment's Device fields first (bind), then any slots the program adds
// (scheduled optimizer values). The CUDA backend mirrors data()/bytes() to the device each step.
class scalar_block {
 public:
  // 64 slots unless told otherwise: the Device fields and the scheduled values of a few groups
  explicit scalar_block(std::size_t slots = 64) { resize(slots); }

  // Binds E's Device fields to the first slots (their current values move in).
  template <experiment E>
  void bind(E& e) {
    constexpr std::size_t n = device_field_count<E>();
    // The Device fields own the first slots (device_slot<E> says so at compile time): a slot added
    // before them would share its slot with a field.
    if (m_used > 0 && m_bound == 0)
      throw error("E-CUDA-010", "scalar_block::bind came after add(): the " + std::to_string(m_used) + " slot(s) added first would share slots with the experiment's Device fields",
                  "bind the experiment first (block.bind(e)), then add the scheduled slots");
    if (m_slots < n) resize(n);
    std::size_t i = 0;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if constexpr (D::residency == residency::device) {
        using V = typename D::type::value_type;
        static_assert(sizeof(V) <= scalar_slot_bytes, "nitro invariant: a Device value (arithmetic) fits one 8-byte slot");
        D::get(e).bind_slot(reinterpret_cast<V*>(slot_address(i++)));
      }
    });
    m_bound = n;
  }
  // A new slot after the bound ones, holding `v`; returns its reference.
  template <class V>
  scalar_ref add(V v) {
    const std::size_t i = m_used < m_bound ? m_bound : m_used;
    if (i >= m_slots) resize(i + 8);
    m_used = i + 1;
    set(i, v);
    return scalar_ref::at(static_cast<int>(i), scalar_type_of<V>());
  }
  template <class V>
  void set(std::size_t slot, V v) {
    if (slot >= m_slots)
      throw error("E-CUDA-010", "scalar slot " + std::to_string(slot) + " is outside the block of " + std::to_string(m_slots) + " slots",
                  "use the reference scalar_block::add returned");
    std::memcpy(slot_address(slot), &v, sizeof v);
  }
  void set(scalar_ref const& r, double v) {
    switch (r.type) {
      case scalar_type::f32: set(static_cast<std::size_t>(r.slot), static_cast<float>(v)); break;
      case scalar_type::f64: set(static_cast<std::size_t>(r.slot), v); break;
      case scalar_type::i32: set(static_cast<std::size_t>(r.slot), static_cast<std::int32_t>(v)); break;
      case scalar_type::i64: set(static_cast<std::size_t>(r.slot), static_cast<std::int64_t>(v)); break;
      case scalar_type::u8: set(static_cast<std::size_t>(r.slot), static_cast<unsigned char>(v)); break;
    }
  }
  double get(scalar_ref const& r) const { return r.read(m_data.get()); }

  void const* data() const noexcept { return m_data.get(); }
  std::size_t slots() const noexcept { return m_used > m_bound ? m_used : m_bound; }
  std::size_t bytes() const noexcept { return slots() * scalar_slot_bytes; }

 private:
  void* slot_address(std::size_t i) noexcept { return m_data.get() + i; }
  // Growing would move bound fields' slots: the block is sized once, before binding, or grows only
  // while nothing is bound.
  void resize(std::size_t n) {
    if (m_bound != 0 && m_data)
      throw error("E-CUDA-010", "the scalar block cannot grow after Device fields were bound to it",
                  "add every scheduled slot before bind(), or size the block with scalar_block(n)");
    auto d = std::make_unique<double[]>(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = 0;
    if (m_data) std::memcpy(d.get(), m_data.get(), m_slots * scalar_slot_bytes);
    m_data = std::move(d);
    m_slots = n;
  }

  std::unique_ptr<double[]> m_data;
  std::size_t m_slots = 0, m_bound = 0, m_used = 0;
};

}  // namespace nitro::cuda
