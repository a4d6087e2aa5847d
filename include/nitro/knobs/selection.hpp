// nitro/knobs/selection.hpp — choosing a point: --set over --variant over the default.
//
//   nitro::selection_request req;            // what the command line said
//   req.variant = "small";
//   req.sets = {{"lr", "0.002"}};
//   auto sel = nitro::resolve_selection(cat, req);   // every knob's value and source, the program
//   FashionMLP<128> e;                               // a default experiment ...
//   nitro::apply_selection(e, sel);                  // ... holding the selected values, before any
//                                                    // hook (build_data, build_model) reads one
//   auto kws = nitro::selection_keywords<FashionMLP<128>>(sel);   // run keywords that are knobs
//
// Sources: default, variant, set; the run overrides --steps, --eval-every, --diagnostics and
// --set device=... (the backend: every trainer takes it, no experiment declares it) are recorded
// with source `override`. Mistakes are errors with the note's codes: E-KNOB-004 (unknown
// variant), E-KNOB-005 (unknown knob), E-KNOB-010 (a value that does not parse), E-KNOB-011 (a
// GraphConst value not compiled in), E-KNOB-013 (a knob set twice).
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/declarations.hpp"
#include "nitro/knobs/detail/did_you_mean.hpp"
#include "nitro/knobs/knob_value.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <optional>     // overrides
#include <string>       // names
#include <tuple>        // keyword arguments
#include <utility>      // pair, index_sequence
#include <vector>       // sets

namespace nitro {

enum class knob_source { fallback, variant, set, override_ };
constexpr char const* to_string(knob_source s) noexcept {
  switch (s) {
    case knob_source::fallback: return "default";
    case knob_source::variant: return "variant";
    case knob_source::set: return "set";
    case knob_source::override_: return "override";
  }
  return "?";
}

// What the command line asked for.
struct selection_request {
  std::optional<std::string> variant;
  std::vector<std::pair<std::string, std::string>> sets;  // --set knob=value, in order
  std::optional<std::int64_t> steps;                      // --steps N: optimizer steps, instead of epochs
  std::optional<std::int64_t> eval_every;                 // --eval-every N: evaluate valid every N steps
  bool diagnostics = false;                               // --diagnostics: gradient and parameter norms per log line
  std::optional<std::string> device;                      // --set device=cpu|cuda|cuda:N: the backend ("cpu", "cuda:N")

  bool empty() const noexcept { return !variant && sets.empty() && !steps && !eval_every && !diagnostics && !device; }
  // The GPU --set device=cuda[:N] names, or -1 for the CPU.
  int cuda_index() const {
    if (!device || *device == "cpu") return -1;
    return std::stoi(device->substr(5));
  }

  // The command-line arguments that ask for this again (children of `sweep --jobs`, Slurm scripts).
  std::vector<std::string> to_args() const {
    std::vector<std::string> a;
    if (variant) { a.push_back("--variant"); a.push_back(*variant); }
    for (auto const& [k, v] : sets) { a.push_back("--set"); a.push_back(k + "=" + v); }
    if (steps) { a.push_back("--steps"); a.push_back(std::to_string(*steps)); }
    if (eval_every) { a.push_back("--eval-every"); a.push_back(std::to_string(*eval_every)); }
    if (diagnostics) a.push_back("--diagnostics");
    if (device) { a.push_back("--set"); a.push_back("device=" + *device); }
    return a;
  }

  nlohmann::ordered_json json() const {
    nlohmann::ordered_json j;
    j["variant"] = variant ? nlohmann::ordered_json(*variant) : nlohmann::ordered_json(nullptr);
    j["sets"] = nlohmann::ordered_json::array();
    for (auto const& [k, v] : sets) j["sets"].push_back({k, v});
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    if (steps) o["steps"] = *steps;
    if (eval_every) o["eval_every"] = *eval_every;
    if (diagnostics) o["diagnostics"] = true;
    if (device) o["device"] = *device;
    j["overrides"] = o;
    return j;
  }
  static selection_request from_json(nlohmann::ordered_json const& j) {
    selection_request r;
    if (j.contains("variant") && j["variant"].is_string()) r.variant = j["variant"].get<std::string>();
    if (j.contains("sets") && j["sets"].is_array())
      for (auto const& p : j["sets"])
        if (p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_string())
          r.sets.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
    if (j.contains("overrides") && j["overrides"].is_object()) {
      auto const& o = j["overrides"];
      if (o.contains("steps") && o["steps"].is_number_integer()) r.steps = o["steps"].get<std::int64_t>();
      if (o.contains("eval_every") && o["eval_every"].is_number_integer()) r.eval_every = o["eval_every"].get<std::int64_t>();
      if (o.contains("diagnostics") && o["diagnostics"].is_boolean()) r.diagnostics = o["diagnostics"].get<bool>();
      if (o.contains("device") && o["device"].is_string()) r.device = o["device"].get<std::string>();
    }
    return r;
  }
  friend bool operator==(selection_request const&, selection_request const&) = default;
};

struct knob_choice {
  knob_value value;
  knob_source source = knob_source::fallback;
};

// A resolved selection: every knob of the catalog (same order) with value and source, and the
// program (index into nitro::main's list) compiled for its GraphConst values.
struct selection {
  selection_request request;
  std::vector<knob_choice> knobs;
  std::size_t program = 0;

  knob_choice const& at(catalog const& c, std::string_view name) const {
    std::size_t i = c.knob_index(name);
    if (i >= knobs.size()) throw error("E-KNOB-005", "no knob called '" + std::string(name) + "'", "name a declared knob");
    return knobs[i];
  }
  std::uint64_t seed(catalog const& c) const {
    knob_choice const& k = at(c, "seed");
    return k.value.kind == knob_kind::unsigned_integer ? k.value.u : static_cast<std::uint64_t>(k.value.i);
  }
};

namespace detail {
NITRO_RUNTIME_INLINE void check_compiled(catalog const& c, knob_info const& k, knob_value const& v, std::string const& where);
}  // namespace detail

NITRO_RUNTIME_INLINE selection resolve_selection(catalog const& c, selection_request const& req);

// Writes the selected values into the experiment's fields (GraphConst fields are the program's).
template <class E>
void apply_selection(E& e, catalog const& c, selection const& s) {
  std::size_t i = 0;
  std::apply(
      [&](auto const&... k) {
        (
            [&](auto const& kd) {
              using K = std::remove_cvref_t<decltype(kd)>;
              using T = knob_traits<E, K::name>;
              if constexpr (T::is_field && !T::is_graph_const) {
                using F = typename T::field::type;
                detail::knob_access<F>::write(T::field::get(e), s.knobs[i].value.template as<typename T::value_type>());
              }
              ++i;
            }(k),
            ...);
      },
      declarations<E>::knob_items());
  (void)c;
}

// The run keywords that are knobs but not fields, as keyword arguments for the handle:
//   std::apply([&](auto... kw) { nitro::Nitro h(e, kw...); ... }, nitro::selection_keywords<E>(sel));
// Each is a std::optional: a knob nobody selected passes nothing, so the handle resolves the keyword
// itself (to the knob's default, which is that resolution) and its records name the true source.
template <class E>
auto selection_keywords(selection const& s) {
  using items = typename declarations<E>::knob_tuple;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat([&] {
      using K = std::tuple_element_t<I, items>;
      using T = knob_traits<E, K::name>;
      if constexpr (T::is_keyword) {
        using V = typename T::value_type;
        auto const& k = s.knobs[I];
        return std::tuple{keyword_knob<K::name>::make(k.source == knob_source::fallback ? std::optional<V>{} : std::optional<V>(k.value.template as<V>()))};
      } else return std::tuple<>{};
    }()...);
  }(std::make_index_sequence<std::tuple_size_v<items>>{});
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE void check_compiled(catalog const& c, knob_info const& k, knob_value const& v, std::string const& where) {
  if (!k.graph_const) return;
  for (auto const& x : k.compiled)
    if (x == v) return;
  throw error("E-KNOB-011",
              where + " asks for " + k.name + "=" + v.str() + ", but this binary was compiled for " + k.name + " = " + k.accepted() +
                  " only (" + k.name + " is a GraphConst: each value is a program)",
              "choose one of " + k.accepted() + ", or add the instantiation for " + k.name + "=" + v.str() + " to nitro::main<" +
                  join_names(c.programs) + ", ...> and rebuild");
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE selection resolve_selection(catalog const& c, selection_request const& req) {
  selection s;
  s.request = req;
  s.knobs.resize(c.knobs.size());
  for (std::size_t i = 0; i < c.knobs.size(); ++i) s.knobs[i] = {c.knobs[i].default_value, knob_source::fallback};

  if (req.variant) {
    variant_info const* v = c.find_variant(*req.variant);
    if (!v) {
      std::string near = detail::did_you_mean(*req.variant, c.variant_names());
      throw error("E-KNOB-004",
                  "--variant names '" + *req.variant + "', which the experiment does not declare" +
                      (near.empty() ? std::string() : "; did you mean '" + near + "'?"),
                  c.variants.empty() ? "the experiment declares no variants; add `static constexpr auto variants()` to it"
                                     : "name one of its variants: " + detail::join_names(c.variant_names()) + " (see `variants`)");
    }
    for (auto const& [name, value] : v->sets) {
      std::size_t i = c.knob_index(name);
      detail::check_compiled(c, c.knobs[i], value, "the variant '" + v->name + "'");
      s.knobs[i] = {value, knob_source::variant};
    }
  }

  std::vector<std::string> seen;
  for (auto const& [name, text] : req.sets) {
    knob_info const* k = c.find_knob(name);
    if (!k) {
      std::string near = detail::did_you_mean(name, c.knob_names());
      throw error("E-KNOB-005",
                  "--set names '" + name + "', which the experiment does not declare" +
                      (near.empty() ? std::string() : "; did you mean '" + near + "'?"),
                  "set one of its knobs: " + detail::join_names(c.knob_names()) + " (see `variants`)");
    }
    for (auto const& n : seen)
      if (n == name)
        throw error("E-KNOB-013", "--set gives the knob '" + name + "' twice", "keep one --set " + name + "=... (or set it in one place)");
    seen.push_back(name);
    knob_value v = parse_knob_value(k->name, k->kind, k->range, text, "--set");
    detail::check_compiled(c, *k, v, "--set");
    s.knobs[c.knob_index(name)] = {v, knob_source::set};
  }

  // the program compiled for the selected GraphConst values
  s.program = c.programs.size();
  for (std::size_t p = 0; p < c.programs.size() && s.program == c.programs.size(); ++p) {
    bool match = true;
    for (std::size_t i = 0; i < c.knobs.size(); ++i)
      if (c.knobs[i].graph_const && !(c.program_values[p][i] == s.knobs[i].value)) match = false;
    if (match) s.program = p;
  }
  if (s.program == c.programs.size()) {
    std::string want;
    for (std::size_t i = 0; i < c.knobs.size(); ++i)
      if (c.knobs[i].graph_const) want += (want.empty() ? "" : ", ") + c.knobs[i].name + "=" + s.knobs[i].value.str();
    throw error("E-KNOB-011", "no program compiled into this binary has " + want + " (compiled: " + detail::join_names(c.programs) + ")",
                "choose a combination that is compiled in, or add its instantiation to nitro::main<...> and rebuild");
  }
  return s;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
