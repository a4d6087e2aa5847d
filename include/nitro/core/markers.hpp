// nitro/core/markers.hpp — where an experiment's field lives: GraphConst, Device, Host.
//
//   nitro::GraphConst<int, 128> width;   compiled in: the value is part of the type, so a new
//                                        value is a new program (`decltype(width)::value`).
//   nitro::Device<float> smoothing{0.05f};  one slot of the handle's block of device scalars;
//                                        schedules and set_device change it without recompiling.
//   anything else (or nitro::Host<T>)    stays on the host and is never transferred.
#pragma once

#include "nitro/core/meta.hpp"

#include <type_traits>  // traits below

namespace nitro {

// ---- GraphConst -------------------------------------------------------------------------------
template <class T, T V>
struct GraphConst {
  static_assert(std::is_integral_v<T> || std::is_enum_v<T>,
                "E-MARK-006: nitro::GraphConst<T, V> holds a template argument, so T must be an integral or enum type. Fix: use int, std::int64_t, bool or an enum.");
  using value_type = T;
  static constexpr T value = V;
  constexpr operator T() const noexcept { return V; }  // NOLINT: reads like the value it is
  constexpr T get() const noexcept { return V; }
};

template <class T> struct is_graph_const : std::false_type {};
template <class T, T V> struct is_graph_const<GraphConst<T, V>> : std::true_type {};
template <class T> inline constexpr bool is_graph_const_v = is_graph_const<std::remove_cvref_t<T>>::value;

// ---- Device -----------------------------------------------------------------------------------
// Until a handle binds it, a Device field holds its own value. A handle binds the field to a slot
// of its device-scalar block; from then on reads and writes go through the slot, so a schedule or
// set_device written between steps is what the next step's hooks and kernels read. A copy of a
// bound field is unbound and holds the value it had.
template <class T>
class Device {
  static_assert(std::is_arithmetic_v<T>, "E-MARK-007: nitro::Device<T> is one device scalar, so T must be arithmetic. Fix: nitro::Device<float>, nitro::Device<int>, ...; keep other values Host fields.");

 public:
  using value_type = T;
  constexpr Device() noexcept = default;
  constexpr Device(T v) noexcept : m_value(v) {}  // NOLINT: `Device<float> s = 0.05f;` reads naturally
  constexpr Device(Device const& o) noexcept : m_value(o.get()) {}
  constexpr Device& operator=(Device const& o) noexcept { set(o.get()); return *this; }
  constexpr Device& operator=(T v) noexcept { set(v); return *this; }

  constexpr T get() const noexcept { return m_slot ? *m_slot : m_value; }
  constexpr operator T() const noexcept { return get(); }  // NOLINT
  constexpr void set(T v) noexcept { (m_slot ? *m_slot : m_value) = v; }

  // Where kernels read the value from: the bound slot, or the field's own storage.
  T const* slot() const noexcept { return m_slot ? m_slot : &m_value; }
  bool bound() const noexcept { return m_slot != nullptr; }

  // Binding is the handle's business (train/); the current value moves into the slot.
  void bind_slot(T* slot) noexcept { *slot = get(); m_slot = slot; }
  void unbind_slot() noexcept { if (m_slot) { m_value = *m_slot; m_slot = nullptr; } }

 private:
  T m_value{};
  T* m_slot = nullptr;
};

template <class T> struct is_device : std::false_type {};
template <class T> struct is_device<Device<T>> : std::true_type {};
template <class T> inline constexpr bool is_device_v = is_device<std::remove_cvref_t<T>>::value;

// ---- Host -------------------------------------------------------------------------------------
// Unmarked fields are Host already; Host<T> only says so out loud.
template <class T>
struct Host {
  T value{};
  constexpr operator T const&() const noexcept { return value; }  // NOLINT
  constexpr operator T&() noexcept { return value; }              // NOLINT
  constexpr T const* operator->() const noexcept { return &value; }
  constexpr T* operator->() noexcept { return &value; }
};
template <class T> struct is_host_marker : std::false_type {};
template <class T> struct is_host_marker<Host<T>> : std::true_type {};

enum class residency { graph_const, device, host };

template <class T>
constexpr residency residency_of() noexcept {
  if constexpr (is_graph_const_v<T>) return residency::graph_const;
  else if constexpr (is_device_v<T>) return residency::device;
  else return residency::host;
}
constexpr char const* to_string(residency r) noexcept {
  switch (r) {
    case residency::graph_const: return "GraphConst";
    case residency::device: return "Device";
    case residency::host: return "Host";
  }
  return "?";
}

// ---- asking for a compile-time value, checked ---------------------------------------------------
// `nitro::graph_const_v<&FashionMLP::width>` is the field's value as a constant expression (as is
// `decltype(width)::value`). Naming a run-time field there is a compile error that names it:
//   graph_const_required<&FashionMLP::lr>
template <auto Member>
struct graph_const_required {
  static_assert(always_false_v<Member>,
                "E-MARK-001: a value the compiler must know (a width, a shape) was asked of a run-time field (Device "
                "or Host). Fix: declare the field as nitro::GraphConst<T, V> (a class template parameter when it varies), "
                "or pass a constant.");
  static constexpr int value = 0;
};

namespace detail {
template <class M> struct member_type_of;
template <class T, class C> struct member_type_of<T C::*> { using type = T; };
template <auto Member>
constexpr auto graph_const_of() noexcept {
  using F = typename member_type_of<decltype(Member)>::type;
  if constexpr (is_graph_const_v<F>) return F::value;
  else return graph_const_required<Member>::value;
}
}  // namespace detail

template <auto Member>
inline constexpr auto graph_const_v = detail::graph_const_of<Member>();

// The diagnostics for writing a device scalar into a field that is not one.
template <auto Member>
struct graph_const_is_not_writable {
  static_assert(always_false_v<Member>,
                "E-MARK-002: a GraphConst field was given where a run-time value is required (set_device, a schedule): "
                "its value is the program. Fix: build the handle from the instantiation with the other value, or declare "
                "the field nitro::Device<T> if it should change without recompiling.");
  static constexpr bool ok = false;
};
template <auto Member>
struct host_field_is_not_on_the_device {
  static_assert(always_false_v<Member>,
                "E-MARK-003: a Host field was given where a Device field is required (set_device, a schedule's device "
                "key). Fix: declare the field nitro::Device<T>.");
  static constexpr bool ok = false;
};

}  // namespace nitro
