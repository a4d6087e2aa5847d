// nitro/optim/resolve.hpp — schedule keys resolved to their slots, by the compiler.
//
// Two namespaces: `opt`, the fields of every group's program (eta, lambda, then its rule's fields,
// each named by its path inside the rule: adamw.beta1, sam.adamw.beta1, sam.rho, chain.2.momentum —
// rule.hpp, names_path; a key may give the path or any tail of it, beta1 or adamw.beta1), and
// `device`, the experiment's Device fields. A key is
//   name               bare: one namespace matching binds; both is an ambiguity (E-SCHED-001) that
//                      shows the qualified forms; neither is an error naming the fix (E-SCHED-002) —
//                      a Host field is in neither namespace, a GraphConst cannot be scheduled (E-MARK-002)
//   opt.path           the rule field `path` names, in every group whose program has it
//   opt.<group>.path   path-bound: that group only; overrides the bare key for that group
//   device.name        the Device field `name` (a Host field: E-MARK-003; a GraphConst: E-MARK-002)
// A name that fits two fields of one group (momentum in chain(sgd, sgd)) is an error that shows the
// paths naming each (E-SCHED-012). Two keys for one slot are an error (E-SCHED-006). Everything here
// is a constant expression; the diagnostics are class templates whose arguments spell the key and
// what it could have been.
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
template <class Key, class Qualified>
struct schedule_key_names_several_rule_fields {
  static_assert(always_false<Key, Qualified>,
                "E-SCHED-012: a schedule key names more than one field of one group's rule (chain(sgd, sgd) has two "
                "momentum fields), and would drive them all. Fix: write one of the qualified forms shown above, a path "
                "that names one field (nitro::key<\"opt.chain.2.momentum\">).");
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
  using type = typename decltype(nitro::detail::nth_of<I>(typename experiment_traits<E>::fields{}))::type;
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
// Every group's program has eta and lambda, then its rule's fields; keys name them by path
// (rule.hpp, names_path): "eta", "beta1", "adamw.beta1", "chain.2.momentum".
template <class R>
using program_fields = typename detail::concat_names<field_names<"eta", "lambda">, typename R::fields>::type;
template <class R>
using program_paths = typename detail::concat_names<field_names<"eta", "lambda">, rule_paths_t<R>>::type;

template <class... Ps>  // Ps: field_names<...> of each group's paths
struct opt_namespace {
  static constexpr std::size_t group_count = sizeof...(Ps);
  static constexpr std::size_t total = (std::size_t{0} + ... + Ps::size);
  // how many fields of group g `name` names (more than one: the key is ambiguous there)
  static constexpr std::size_t named_in(std::size_t g, std::string_view name) noexcept {
    std::size_t i = 0, n = 0;
    ((n += (i++ == g ? paths_named<Ps>(name) : 0)), ...);
    return n;
  }
  static constexpr bool group_has(std::size_t g, std::string_view name) noexcept { return named_in(g, name) > 0; }
  static constexpr bool any_has(std::string_view name) noexcept { return ((paths_named<Ps>(name) > 0) || ...); }
  // the first group where `name` names more than one field, or -1
  static constexpr int ambiguous_group(std::string_view name) noexcept {
    for (std::size_t g = 0; g < group_count; ++g)
      if (named_in(g, name) > 1) return static_cast<int>(g);
    return -1;
  }
  // some field of group g is named by both a and b (two keys that drive one slot)
  static constexpr bool share_a_field(std::size_t g, std::string_view a, std::string_view b) noexcept {
    std::size_t i = 0;
    bool r = false;
    ((r = r || (i++ == g && [&] {
            for (auto p : Ps::views)
              if (names_path(p, a) && names_path(p, b)) return true;
            return false;
          }())),
     ...);
    return r;
  }
  static constexpr auto all_names() {
    std::array<std::string_view, total> a{};
    std::size_t k = 0;
    ((void)[&] { for (auto v : Ps::views) a[k++] = v; }(), ...);
    return a;
  }
  // the paths of group g's fields `name` names
  static constexpr auto named_paths(std::size_t g, std::string_view name) {
    std::array<std::string_view, total> a{};
    std::size_t i = 0, k = 0;
    ((void)[&] {
       if (i++ == g)
         for (auto p : Ps::views)
           if (names_path(p, name)) a[k++] = p;
     }(), ...);
    return std::pair{a, k};
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
enum class key_form { bare, opt, device };
struct parsed_key {
  key_form form;
  std::string_view field;  // after "opt." or "device.": for opt, [<group>.]<path or a tail of it>
};
constexpr parsed_key parse_key(std::string_view k) noexcept {
  if (k.starts_with("device.")) return {key_form::device, k.substr(7)};
  if (k.starts_with("opt.")) return {key_form::opt, k.substr(4)};
  return {key_form::bare, k};
}

enum class key_status { device, opt_all, opt_group, ambiguous, none, graph_const, host_on_device, unknown_group, no_rule_field, no_device_field };
struct key_resolution {
  key_status status;
  int field_index = -1;   // among all experiment fields (device, graph_const, host_on_device)
  int device_slot = -1;   // among the Device fields
  int group = -1;         // opt_group, and the group whose fields are listed for no_rule_field
  std::string_view field; // what names the slot: a Device field, or a rule field's path or tail
};

// opt.<rest>: a group's name then a path (that group only), else a path (every group having it).
template <class Layout, class NS>
constexpr key_resolution resolve_opt_key(std::string_view rest) noexcept {
  int bound = -1;  // a group whose name opens the key
  for (std::size_t g = 0; g < Layout::group_names.size(); ++g) {
    std::string_view const name = Layout::group_names[g];
    if (rest.size() > name.size() && rest.starts_with(name) && rest[name.size()] == '.') {
      std::string_view const path = rest.substr(name.size() + 1);
      if (NS::group_has(g, path)) return {key_status::opt_group, -1, -1, static_cast<int>(g), path};
      bound = static_cast<int>(g);
    }
  }
  if (NS::any_has(rest)) return {key_status::opt_all, -1, -1, -1, rest};
  if (bound >= 0) return {key_status::no_rule_field, -1, -1, bound, rest.substr(Layout::group_names[std::size_t(bound)].size() + 1)};
  const auto dot = rest.find('.');  // opt.<not a group>.<a field some group has>: the group is misspelt
  if (dot != std::string_view::npos && NS::any_has(rest.substr(dot + 1))) return {key_status::unknown_group, -1, -1, -1, rest.substr(dot + 1)};
  return {key_status::no_rule_field, -1, -1, -1, rest};
}

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
      return resolve_opt_key<Layout, NS>(p.field);
    case key_form::device:
      if (slot >= 0) return {key_status::device, fi, slot, -1, p.field};
      if (fi >= 0 && r == residency::graph_const) return {key_status::graph_const, fi, -1, -1, p.field};
      if (fi >= 0) return {key_status::host_on_device, fi, -1, -1, p.field};
      return {key_status::no_device_field, -1, -1, -1, p.field};
  }
  return {key_status::none, -1, -1, -1, p.field};
}

// The group in which a resolved opt key names more than one field, or -1.
template <class NS>
constexpr int ambiguous_in(key_resolution const& r) noexcept {
  if (r.status == key_status::opt_all) return NS::ambiguous_group(r.field);
  if (r.status == key_status::opt_group && NS::named_in(std::size_t(r.group), r.field) > 1) return r.group;
  return -1;
}
// "opt.[<group>.]<path>": the I-th field key K names in its ambiguous group, written so it names one.
template <class E, class Layout, class NS, fixed_string K, std::size_t I>
struct qualified_path_src {
  static constexpr auto text = [] {
    constexpr key_resolution r = resolve_key<E, Layout, NS>(K.view());
    constexpr auto g = static_cast<std::size_t>(ambiguous_in<NS>(r));
    std::array<char, 256> buf{};
    std::size_t n = 0;
    auto put = [&](std::string_view v) { for (char c : v) if (n < buf.size()) buf[n++] = c; };
    put("opt.");
    if (r.status == key_status::opt_group) { put(Layout::group_names[g]); put("."); }
    put(NS::named_paths(g, r.field).first[I]);
    return std::pair{buf, n};
  }();
  static constexpr std::string_view get() { return {text.first.data(), text.second}; }
};
template <class E, class Layout, class NS, fixed_string K, std::size_t... I>
auto qualified_paths_diag(std::index_sequence<I...>) -> qualified_forms<str_from<qualified_path_src<E, Layout, NS, K, I>>...>;

// Turns an unresolved key into its diagnostic; true when the key is fine.
template <class E, class Layout, class NS, class GroupFields, fixed_string K>
constexpr bool check_key() {
  constexpr key_resolution r = resolve_key<E, Layout, NS>(K.view());
  using key_str = str_of<K>;
  if constexpr (ambiguous_in<NS>(r) >= 0)
    return schedule_key_names_several_rule_fields<key_str, decltype(qualified_paths_diag<E, Layout, NS, K>(
                                                               std::make_index_sequence<NS::named_in(std::size_t(ambiguous_in<NS>(r)), r.field)>{}))>::ok;
  else if constexpr (r.status == key_status::ambiguous)
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

// Two resolved keys drive one slot at the same level (two bare keys, or two path-bound keys of one
// group; a path-bound key over a bare one is the override, not a clash).
template <class NS>
constexpr bool same_slot(key_resolution const& a, key_resolution const& b) noexcept {
  if (a.status == key_status::device || b.status == key_status::device)
    return a.status == b.status && a.device_slot == b.device_slot;
  if (a.status == key_status::opt_all && b.status == key_status::opt_all) {
    for (std::size_t g = 0; g < NS::group_count; ++g)
      if (NS::share_a_field(g, a.field, b.field)) return true;
    return false;
  }
  if (a.status == key_status::opt_group && b.status == key_status::opt_group)
    return a.group == b.group && NS::share_a_field(std::size_t(a.group), a.field, b.field);
  return false;
}

}  // namespace optim::detail
}  // namespace nitro
