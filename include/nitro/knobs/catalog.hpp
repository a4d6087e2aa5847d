// nitro/knobs/catalog.hpp — what a trainer binary may vary, at run time: its knobs (with kinds,
// defaults and docs), variants, sweeps and the programs compiled into it.
//
//   auto cat = nitro::make_catalog<FashionMLP<128>, FashionMLP<256>>();
//   cat.knobs[0].name, cat.knobs[0].default_value.str(), cat.programs[1]   // "FashionMLP<width=256>"
//
// The programs are instantiations of one experiment; the first is the default, so its GraphConst
// values are the defaults of the GraphConst knobs, and each GraphConst knob accepts exactly the
// values compiled in. Defaults of other knobs are the fields of a default-constructed experiment
// (or, for a run keyword that is not a field, what the keyword resolves to without one) — which is
// why heavy data belongs in a build_data() hook, never a member initialiser.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/knobs/declarations.hpp"
#include "nitro/knobs/knob_value.hpp"

#include <cstddef>      // size_t
#include <string>       // names
#include <string_view>  // lookups
#include <tuple>        // declarations
#include <type_traits>  // traits
#include <utility>      // index_sequence
#include <vector>       // tables

namespace nitro {

// nitro::main<Programs...> with programs that cannot share one command line.
template <class First, class Other>
struct programs_of_different_experiments {
  static_assert(always_false<First, Other>,
                "E-KNOB-009: the programs given to nitro::main<...> are not instantiations of one experiment. Fix: build "
                "one binary per experiment, or list instantiations of one class template (FashionMLP<128>, FashionMLP<256>).");
  static constexpr bool ok = false;
};
template <class First, class Other, class Field>
struct programs_differ_in_a_graph_const_that_is_no_knob {
  static_assert(always_false<First, Other, Field>,
                "E-KNOB-009: two programs given to nitro::main<...> differ in a GraphConst field that knobs() does not "
                "declare, so no selection could reach the second. Fix: declare the field as a knob.");
  static constexpr bool ok = false;
};

struct knob_info {
  std::string name;
  std::string doc;  // knob<"name">("doc"); a run keyword's knob without one: the keyword table's doc
  knob_kind kind = knob_kind::integer;
  knob_range range{};
  nitro::residency residency = nitro::residency::host;
  bool is_field = false;          // an experiment field (else a run keyword)
  bool graph_const = false;       // a GraphConst field: each value is a program
  bool implicit = false;          // `seed`, added by nitro
  std::string cxx_type;           // "float", "GraphConst<int>", "Device<float>", "enum", "list<int, 2>",
                                  // "run keyword (uint64)"
  knob_value default_value{};
  std::vector<knob_value> compiled;  // GraphConst: the values compiled into this binary

  std::string accepted() const {
    if (!graph_const) return accepted_texts(kind, range);
    std::string s;
    for (auto const& v : compiled) s += (s.empty() ? "" : ", ") + v.str();
    return s;
  }
};

struct variant_info {
  std::string name;
  std::vector<std::pair<std::string, knob_value>> sets;  // in declaration order
};

struct axis_info {
  std::string knob;
  std::vector<knob_value> values;
};

struct sweep_info {
  std::string name;
  std::string base;  // the base variant of every point, or ""
  std::vector<axis_info> axes;
  std::size_t points() const {
    std::size_t n = 1;
    for (auto const& a : axes) n *= a.values.size();
    return n;
  }
};

struct catalog {
  std::string experiment;                        // NITRO_EXPERIMENT's name: "FashionMLP"
  std::vector<knob_info> knobs;                  // declared order; `seed` last when nitro adds it
  std::vector<variant_info> variants;
  std::vector<sweep_info> sweeps;
  std::vector<std::string> programs;             // "FashionMLP<width=128>", in nitro::main's order
  std::vector<std::vector<knob_value>> program_values;  // [program][knob]: GraphConst knobs' values

  knob_info const* find_knob(std::string_view n) const noexcept {
    for (auto const& k : knobs) if (k.name == n) return &k;
    return nullptr;
  }
  std::size_t knob_index(std::string_view n) const noexcept {
    for (std::size_t i = 0; i < knobs.size(); ++i) if (knobs[i].name == n) return i;
    return knobs.size();
  }
  variant_info const* find_variant(std::string_view n) const noexcept {
    for (auto const& v : variants) if (v.name == n) return &v;
    return nullptr;
  }
  sweep_info const* find_sweep(std::string_view n) const noexcept {
    for (auto const& s : sweeps) if (s.name == n) return &s;
    return nullptr;
  }
  std::vector<std::string> knob_names() const { std::vector<std::string> v; for (auto const& k : knobs) v.push_back(k.name); return v; }
  std::vector<std::string> variant_names() const { std::vector<std::string> v; for (auto const& k : variants) v.push_back(k.name); return v; }
  std::vector<std::string> sweep_names() const { std::vector<std::string> v; for (auto const& k : sweeps) v.push_back(k.name); return v; }
};

namespace detail {

template <class T> std::string cxx_scalar_name();
template <class T> std::string cxx_list_name() {
  using L = knob_list_traits<T>;
  if constexpr (L::length == 0) return "list<" + cxx_scalar_name<typename L::element>() + ">";
  else return "list<" + cxx_scalar_name<typename L::element>() + ", " + std::to_string(L::length) + ">";
}
template <class T> std::string cxx_scalar_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_enum_v<T>) return "enum";
  else if constexpr (knob_list_traits<T>::list) return cxx_list_name<T>();
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else if constexpr (std::is_same_v<T, unsigned>) return "unsigned";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  else if constexpr (std::is_signed_v<T>) return "integer";
  else return "unsigned integer";
}

// Reads and writes a knob field through its marker.
template <class F> struct knob_access {
  using type = F;
  static F read(F const& f) { return f; }
  template <class V> static void write(F& f, V const& v) { f = static_cast<F>(v); }
};
template <class T, T V> struct knob_access<GraphConst<T, V>> {
  using type = T;
  static T read(GraphConst<T, V> const&) { return V; }
  template <class X> static void write(GraphConst<T, V>&, X const&) {}  // the program is the value
};
template <class T> struct knob_access<Device<T>> {
  using type = T;
  static T read(Device<T> const& f) { return f.get(); }
  template <class V> static void write(Device<T>& f, V const& v) { f.set(static_cast<T>(v)); }
};
template <class T> struct knob_access<Host<T>> {
  using type = T;
  static T read(Host<T> const& f) { return f.value; }
  template <class V> static void write(Host<T>& f, V const& v) { f.value = static_cast<T>(v); }
};

template <class F>
std::string marker_name() {
  using T = typename knob_access<F>::type;
  if constexpr (is_graph_const_v<F>) return std::string("GraphConst<") + cxx_scalar_name<T>() + ">";
  else if constexpr (is_device_v<F>) return std::string("Device<") + cxx_scalar_name<T>() + ">";
  else return cxx_scalar_name<T>();
}

// A declared constant (variant setting, axis value) as text, then as a value of the knob's kind.
template <class L>
std::string literal_text(L const& v) {
  if constexpr (std::is_same_v<L, bool>) return v ? "true" : "false";
  else if constexpr (std::is_enum_v<L>) return knob_value::of(v).str();
  else if constexpr (is_list_constant<L>::value) {
    std::string text = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) text += ',';
      text += literal_text(v[i]);
    }
    return text + "]";
  } else if constexpr (std::is_same_v<L, std::string_view>) return std::string(v);
  else if constexpr (std::is_floating_point_v<L>) return knob_value::shortest(v);
  else return std::to_string(v);
}
template <class L>
knob_value literal_value(knob_info const& k, L const& v, std::string_view where) {
  return parse_knob_value(k.name, k.kind, k.range, literal_text(v), where);
}

template <class E>
std::string program_name() {
  std::string s(experiment_traits<E>::name);
  std::string args;
  for_each_field<E>([&](auto d) {
    using D = decltype(d);
    if constexpr (D::residency == residency::graph_const)
      args += (args.empty() ? "" : ", ") + std::string(D::name.view()) + "=" +
              knob_value::of(static_cast<typename knob_access<typename D::type>::type>(D::type::value)).str();
  });
  return args.empty() ? s : s + "<" + args + ">";
}

template <class P0, class P>
constexpr bool check_program_pair() {
  if constexpr (experiment_traits<P0>::name != experiment_traits<P>::name) {
    return programs_of_different_experiments<P0, P>::ok;
  } else {
    // GraphConst fields that are not knobs must agree
    return []<class... D>(type_list<D...>) {
      return ([]<class Dd>(std::type_identity<Dd>) {
        if constexpr (Dd::residency != residency::graph_const) return true;
        else if constexpr (declarations<P0>::template declares_knob<Dd::name>()) return true;
        else {
          using Other = typename decltype(find_field<Dd::name>(typename experiment_traits<P>::fields{}))::type;
          if constexpr (std::is_void_v<Other>) return true;
          else if constexpr (Dd::type::value == Other::type::value) return true;
          else return programs_differ_in_a_graph_const_that_is_no_knob<P0, P, Dd>::ok;
        }
      }(std::type_identity<D>{}) && ... && true);
    }(typename experiment_traits<P0>::fields{});
  }
}

// The first program's declarations are every program's: a mistake in them is told once, for it.
template <class P0, class... P>
constexpr bool check_programs() {
  if constexpr (!declarations<P0>::ok) return false;
  else return ((declarations<P>::ok && check_program_pair<P0, P>()) && ... && true);
}

}  // namespace detail

namespace detail {
template <class P0, class... Ps>
catalog catalog_of() {
  using decl = declarations<P0>;
  catalog c;
  c.experiment = std::string(experiment_traits<P0>::name);
  const P0 e{};

  std::apply(
      [&](auto const&... k) {
        (
            [&](auto const& kd) {
              using K = std::remove_cvref_t<decltype(kd)>;
              using T = knob_traits<P0, K::name>;
              using V = typename T::value_type;
              knob_info info;
              info.name = std::string(K::name.view());
              // a knob that is a run keyword says nothing new unless it wants to: the keyword table's doc
              info.doc = std::string(kd.doc.empty() ? run_keyword_doc(K::name.view()) : kd.doc);
              info.kind = knob_kind_of<V>();
              info.range = knob_range::of<V>();
              info.residency = T::residency;
              info.is_field = T::is_field;
              info.graph_const = T::is_graph_const;
              if constexpr (T::is_field) {
                using F = typename T::field::type;
                info.cxx_type = detail::marker_name<F>();
                info.default_value = knob_value::of(static_cast<V>(detail::knob_access<F>::read(T::field::get(e))));
              } else {
                info.cxx_type = std::string("run keyword (") + detail::cxx_scalar_name<V>() + ")";
                info.default_value = knob_value::of(static_cast<V>(keyword_knob<K::name>::resolve(e).value));
              }
              c.knobs.push_back(std::move(info));
            }(k),
            ...);
      },
      decl::knob_items());
  // `seed` added by nitro: its position is last; mark it
  if constexpr (!decl::declares_seed) c.knobs.back().implicit = true;

  // programs and the values compiled in
  auto add_program = [&]<class P>(std::type_identity<P>) {
    c.programs.push_back(detail::program_name<P>());
    std::vector<knob_value> values(c.knobs.size());
    std::size_t i = 0;
    std::apply(
        [&](auto const&... k) {
          (
              [&](auto const& kd) {
                using K = std::remove_cvref_t<decltype(kd)>;
                using T = knob_traits<P, K::name>;
                if constexpr (T::is_graph_const) {
                  using F = typename T::field::type;
                  values[i] = knob_value::of(static_cast<typename T::value_type>(F::value));
                  auto& compiled = c.knobs[i].compiled;
                  bool seen = false;
                  for (auto const& v : compiled) seen = seen || v == values[i];
                  if (!seen) compiled.push_back(values[i]);
                }
                ++i;
              }(k),
              ...);
        },
        declarations<P>::knob_items());
    c.program_values.push_back(std::move(values));
  };
  add_program(std::type_identity<P0>{});
  (add_program(std::type_identity<Ps>{}), ...);

  // variants
  std::apply(
      [&](auto const&... v) {
        (
            [&](auto const& vd) {
              variant_info vi;
              vi.name = std::string(std::remove_cvref_t<decltype(vd)>::name.view());
              std::apply(
                  [&](auto const&... s) {
                    (
                        [&](auto const& sd) {
                          using S = std::remove_cvref_t<decltype(sd)>;
                          knob_info const& k = *c.find_knob(S::knob.view());
                          vi.sets.emplace_back(k.name, detail::literal_value(k, sd.value, "the variant '" + vi.name + "'"));
                        }(s),
                        ...);
                  },
                  vd.settings);
              c.variants.push_back(std::move(vi));
            }(v),
            ...);
      },
      decl::variant_items());

  // sweeps
  std::apply(
      [&](auto const&... w) {
        (
            [&](auto const& wd) {
              using W = std::remove_cvref_t<decltype(wd)>;
              sweep_info si;
              si.name = std::string(W::name.view());
              if constexpr (!std::is_void_v<typename W::base_type>) si.base = std::string(W::base_type::name.view());
              std::apply(
                  [&](auto const&... a) {
                    (
                        [&](auto const& ad) {
                          using A = std::remove_cvref_t<decltype(ad)>;
                          knob_info const& k = *c.find_knob(A::knob.view());
                          axis_info ai;
                          ai.knob = k.name;
                          for (auto const& v : ad.values) ai.values.push_back(detail::literal_value(k, v, "the sweep '" + si.name + "'"));
                          si.axes.push_back(std::move(ai));
                        }(a),
                        ...);
                  },
                  wd.axes);
              c.sweeps.push_back(std::move(si));
            }(w),
            ...);
      },
      decl::sweep_items());
  return c;
}
}  // namespace detail

// The catalog of nitro::main<Programs...>: declarations of the first program, values of all. A
// mistake in the declarations has printed its coded error; the catalog is then not built, which
// would only add errors that say the same.
template <class P0, class... Ps>
catalog make_catalog() {
  if constexpr (detail::check_programs<P0, Ps...>()) return detail::catalog_of<P0, Ps...>();
  else return {};
}

}  // namespace nitro
