// nitro/optim/resolve.hpp — schedule keys resolved to their slots, by the compiler.
//
// Two namespaces: `opt`, the field names of every group's program (eta, lambda, then its rule's
// fields), and `device`, the experiment's Device fields. A key is
//   name               bare: one namespace matching binds; both is an ambiguity (E-SCHED-001) that
//                      shows the qualified forms; neither is an error naming the fix (E-SCHED-002) —
//                      a Host field is in neither namespace, a GraphConst cannot be scheduled (E-MARK-002)
//   opt.name           the rule field `name` of every group whose program has it
//   opt.<group>.name   path-bound: that group only; overrides the bare key for that group
//   device.name        the Device field `name` (a Host field: E-MARK-003; a GraphConst: E-MARK-002)
// Two keys for one slot are an error (E-SCHED-006). Everything here is a constant expression; the
// diagnostics are class templates whose arguments spell the key and what it could have been.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/rule.hpp"
#include "nitro/optim/schedule_map.hpp"

#include <array>        // tables
#include <cstddef>      // size_t
#include <string_view>  // names
#include <type_traits>  // traits
#include <utility>      // index_sequence

namespace nitro {

// ---- diagnostics --------------------------------------------------------------------------------
template <class Key, class Qualified>
struct schedule_key_is_ambiguous {
  static_assert(always_false<Key, Qualified>,
                "E-SCHED-001: a bare schedule key names both a rule field (opt) and a Device field of the experiment "
                "(device). Fix: write one of the qualified forms shown above, nitro::key<\"opt.name\"> or nitro::key<\"device.name\">.");
  static constexpr bool ok = false;
};
template <class Key, class OptFields, class DeviceFields>
struct schedule_key_matches_nothing {
  static_assert(always_false<Key, OptFields, DeviceFields>,
                "E-SCHED-002: a schedule key names neither a rule field (opt) nor a Device field of the experiment "
                "(device); both namespaces are listed above. A Host field is in neither: declare it nitro::Device<T> to "
                "schedule it. Fix: use one of the listed names.");
  static constexpr bool ok = false;
};
template <class Key, class Groups>
struct schedule_key_names_unknown_group {
  static_assert(always_false<Key, Groups>,
                "E-SCHED-003: a path-bound schedule key opt.<group>.<field> names a group that param_group does not "
                "produce (the groups it produces are listed above). Fix: spell the group as param_group returns it.");
  static constexpr bool ok = false;
};
template <class Key, class Fields>
struct schedule_key_names_no_rule_field {
  static_assert(always_false<Key, Fields>,
                "E-SCHED-004: an opt.* schedule key names a field that the group's program does not have (its fields are "
                "listed above). Fix: use one of the listed fields, or give the group a rule that has it.");
  static constexpr bool ok = false;
};
template <class Key, class DeviceFields>
struct schedule_key_names_no_device_field {
  static_assert(always_false<Key, DeviceFields>,
                "E-SCHED-005: a device.* schedule key names no field of the experiment (its Device fields are listed "
                "above). Fix: use one of them, or declare the field nitro::Device<T>.");
  static constexpr bool ok = false;
};
template <class Key, class OtherKey>
struct schedule_keys_bind_the_same_slot {
  static_assert(always_false<Key, OtherKey>,
                "E-SCHED-006: two schedule keys drive the same slot (e.g. eta and opt.eta, or smoothing and "
                "device.smoothing). Fix: keep one of them.");
  static constexpr bool ok = false;
};

namespace optim::detail {

// ---- the device namespace: the experiment's adapted fields --------------------------------------
struct field_row {
  std::string_view name;
  nitro::residency residency;
};
template <class E>
constexpr auto experiment_fields() {
  if constexpr (experiment<E>) {
    return []<class... D>(nitro::detail::type_list<D...>) {
      return std::array<field_row, sizeof...(D)>{field_row{D::name.view(), D::residency}...};
    }(typename experiment_traits<E>::fields{});
  } else {
    return std::array<field_row, 0>{};
  }
}
template <class E, std::size_t I>
struct experiment_field {
  using type = typename decltype([]<class... D>(nitro::detail::type_list<D...>) {
    return std::type_identity<typename nitro::detail::nth<I, D...>::type>{};
  }(typename experiment_traits<E>::fields{}))::type;
};
template <class E>
constexpr std::size_t device_field_count() {
  std::size_t n = 0;
  for (auto const& f : experiment_fields<E>()) n += f.residency == residency::device;
  return n;
}
template <class E>
constexpr auto device_field_indices() {  // positions (among all fields) of the Device fields
  std::array<std::size_t, device_field_count<E>()> out{};
  std::size_t k = 0, i = 0;
  for (auto const& f : experiment_fields<E>()) {
    if (f.residency == residency::device) out[k++] = i;
    ++i;
  }
  return out;
}
template <class E, std::size_t K>
struct device_name_src {
  static constexpr std::string_view get() { return experiment_fields<E>()[device_field_indices<E>()[K]].name; }
};
template <class E, std::size_t... K>
auto device_names_diag(std::index_sequence<K...>) -> device_fields<str_from<device_name_src<E, K>>...>;
template <class E>
using device_names_t = decltype(device_names_diag<E>(std::make_index_sequence<device_field_count<E>()>{}));

// ---- the opt namespace: each group's program fields ---------------------------------------------
// Every group's program has eta and lambda, then its rule's fields.
template <class R>
using program_fields = typename detail::concat_names<field_names<"eta", "lambda">, typename R::fields>::type;

template <class... Fs>  // Fs: field_names<...> of each group
struct opt_namespace {
  static constexpr std::size_t group_count = sizeof...(Fs);
  static constexpr std::size_t total = (std::size_t{0} + ... + Fs::size);
  static constexpr bool group_has(std::size_t g, std::string_view f) noexcept {
    std::size_t i = 0;
    bool r = false;
    ((r = r || (i++ == g && Fs::index_of(f) >= 0)), ...);
    return r;
  }
  static constexpr bool any_has(std::string_view f) noexcept { return ((Fs::index_of(f) >= 0) || ...); }
  static constexpr auto all_names() {
    std::array<std::string_view, total> a{};
    std::size_t k = 0;
    ((void)[&] { for (auto v : Fs::views) a[k++] = v; }(), ...);
    return a;
  }
  static constexpr std::size_t unique_count() {
    auto a = all_names();
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen = seen || a[j] == a[i];
      n += !seen;
    }
    return n;
  }
  static constexpr auto unique_names() {
    auto a = all_names();
    std::array<std::string_view, unique_count()> u{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen = seen || a[j] == a[i];
      if (!seen) u[n++] = a[i];
    }
    return u;
  }
};
template <class NS, std::size_t K>
struct opt_name_src {
  static constexpr std::string_view get() { return NS::unique_names()[K]; }
};
template <class NS, std::size_t... K>
auto opt_names_diag(std::index_sequence<K...>) -> opt_fields<str_from<opt_name_src<NS, K>>...>;
template <class NS>
using opt_names_t = decltype(opt_names_diag<NS>(std::make_index_sequence<NS::unique_count()>{}));

// ---- one key ------------------------------------------------------------------------------------
enum class key_form { bare, opt, opt_path, device };
struct parsed_key {
  key_form form;
  std::string_view group;  // opt_path
  std::string_view field;
};
constexpr parsed_key parse_key(std::string_view k) noexcept {
  if (k.starts_with("device.")) return {key_form::device, {}, k.substr(7)};
  if (k.starts_with("opt.")) {
    std::string_view rest = k.substr(4);
    const auto dot = rest.rfind('.');
    if (dot == std::string_view::npos) return {key_form::opt, {}, rest};
    return {key_form::opt_path, rest.substr(0, dot), rest.substr(dot + 1)};
  }
  return {key_form::bare, {}, k};
}

enum class key_status { device, opt_all, opt_group, ambiguous, none, graph_const, host_on_device, unknown_group, no_rule_field, no_device_field };
struct key_resolution {
  key_status status;
  int field_index = -1;   // among all experiment fields (device, graph_const, host_on_device)
  int device_slot = -1;   // among the Device fields
  int group = -1;         // opt_group, and the group whose fields are listed for no_rule_field
  std::string_view field;
};

template <class E, class Layout, class NS>
constexpr key_resolution resolve_key(std::string_view k) noexcept {
  const parsed_key p = parse_key(k);
  constexpr auto fields = experiment_fields<E>();
  int fi = -1;
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == p.field) fi = static_cast<int>(i);
  int slot = -1;
  if (fi >= 0 && fields[static_cast<std::size_t>(fi)].residency == residency::device) {
    slot = 0;
    for (int i = 0; i < fi; ++i) slot += fields[static_cast<std::size_t>(i)].residency == residency::device;
  }
  const residency r = fi >= 0 ? fields[static_cast<std::size_t>(fi)].residency : residency::host;
  switch (p.form) {
    case key_form::bare: {
      const bool in_opt = NS::any_has(p.field), in_dev = slot >= 0;
      if (in_opt && in_dev) return {key_status::ambiguous, fi, slot, -1, p.field};
      if (in_opt) return {key_status::opt_all, -1, -1, -1, p.field};
      if (in_dev) return {key_status::device, fi, slot, -1, p.field};
      if (fi >= 0 && r == residency::graph_const) return {key_status::graph_const, fi, -1, -1, p.field};
      return {key_status::none, fi, -1, -1, p.field};
    }
    case key_form::opt:
      return NS::any_has(p.field) ? key_resolution{key_status::opt_all, -1, -1, -1, p.field}
                                  : key_resolution{key_status::no_rule_field, -1, -1, -1, p.field};
    case key_form::opt_path: {
      int g = -1;
      for (std::size_t i = 0; i < Layout::group_names.size(); ++i)
        if (Layout::group_names[i] == p.group) g = static_cast<int>(i);
      if (g < 0) return {key_status::unknown_group, -1, -1, -1, p.field};
      if (!NS::group_has(static_cast<std::size_t>(g), p.field)) return {key_status::no_rule_field, -1, -1, g, p.field};
      return {key_status::opt_group, -1, -1, g, p.field};
    }
    case key_form::device:
      if (slot >= 0) return {key_status::device, fi, slot, -1, p.field};
      if (fi >= 0 && r == residency::graph_const) return {key_status::graph_const, fi, -1, -1, p.field};
      if (fi >= 0) return {key_status::host_on_device, fi, -1, -1, p.field};
      return {key_status::no_device_field, -1, -1, -1, p.field};
  }
  return {key_status::none, -1, -1, -1, p.field};
}

// Turns an unresolved key into its diagnostic; true when the key is fine.
template <class E, class Layout, class NS, class GroupFields, fixed_string K>
constexpr bool check_key() {
  constexpr key_resolution r = resolve_key<E, Layout, NS>(K.view());
  using key_str = str_of<K>;
  if constexpr (r.status == key_status::ambiguous)
    return schedule_key_is_ambiguous<key_str, qualified_forms<str_of<concat(fixed_string{"opt."}, K)>,
                                                              str_of<concat(fixed_string{"device."}, K)>>>::ok;
  else if constexpr (r.status == key_status::none)
    return schedule_key_matches_nothing<key_str, opt_names_t<NS>, device_names_t<E>>::ok;
  else if constexpr (r.status == key_status::graph_const)
    return graph_const_is_not_writable<experiment_field<E, static_cast<std::size_t>(r.field_index)>::type::ptr>::ok;
  else if constexpr (r.status == key_status::host_on_device)
    return host_field_is_not_on_the_device<experiment_field<E, static_cast<std::size_t>(r.field_index)>::type::ptr>::ok;
  else if constexpr (r.status == key_status::unknown_group)
    return schedule_key_names_unknown_group<key_str, typename Layout::diagnostic_names>::ok;
  else if constexpr (r.status == key_status::no_rule_field) {
    if constexpr (r.group >= 0)
      return schedule_key_names_no_rule_field<key_str, typename std::tuple_element_t<static_cast<std::size_t>(r.group), GroupFields>::diagnostic>::ok;
    else
      return schedule_key_names_no_rule_field<key_str, opt_names_t<NS>>::ok;
  } else if constexpr (r.status == key_status::no_device_field)
    return schedule_key_names_no_device_field<key_str, device_names_t<E>>::ok;
  else
    return true;
}

// The slot a resolved key drives, for duplicate detection: device slot, or (group or -1, field).
struct slot_id {
  int kind;  // 0 device, 1 opt bare-level, 2 opt path
  int index;
  int group;
  std::string_view field;
  constexpr bool operator==(slot_id const&) const = default;
};

}  // namespace optim::detail
}  // namespace nitro
