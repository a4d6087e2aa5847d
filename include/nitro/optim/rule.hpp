// nitro/optim/rule.hpp — what an optimizer rule is, and the chain combinator.
//
// A rule turns the gradient into an update direction, elementwise, with named fields (every one
// can be scheduled by its name) and per-element state buffers. It works on blocks: stretches of
// at most block_size elements of a group's span, small enough to stay in L1 and wide enough for
// the vector units (the arithmetic is Eigen array expressions, which vectorise sqrt and division):
//   using fields = field_names<"beta1", "beta2", "eps">;   names of its scalar fields
//   using paths = field_names<"adam.beta1", ...>;          optional: each field's path (names_path)
//   static constexpr std::array<domain, N> domains;        what values each field accepts
//   using states = field_names<"m", "v">;                  its state buffers, one flat buffer each per group
//   std::array<double, N> values;                          the fields' values when nothing schedules them
//   double default_lambda;                                 decoupled decay when lambda(group) is absent
//   consts prepare(double const* fields, int64_t t) const  per group and step: the loop's constants (NITRO_HD)
//   static void element<Decay, Anchor>(consts, u, w, a, s)  one element (NITRO_HD): u the direction in and
//                                                          out, w the weight, a its anchor, s its states
//   static void apply<Decay, Anchor>(consts, block)        optional: one block, vectorised; without it the
//                                                          program runs element over the block
//   std::string describe(double const* fields) const       "adam(beta1=0.9, beta2=0.999, eps=1e-08)"
// `element` is the rule: the CUDA backend's fused update (tensor/cuda/optimizer_math.hpp) runs it per
// element of a group's span, the CPU program runs `apply` (the same rule_math calls on Eigen arrays)
// or, for a rule without one, `element` in a loop. So a new rule is one element function, and both
// backends run the same chains, decay anchors and SAM wrappers.
// The optimizer program (program.hpp) applies a group's rule once per step over the group's whole
// flat buffer: u = rule(g); then w <- w - eta*lambda*(w - anchor) on decayed leaves; w <- w - eta*u.
// `eta` and `lambda` are fields of every group; a rule's own fields follow them.
//
// chain(r1, r2, ...) applies r1, then r2 to r1's output, ... (coupled L2 decay then momentum:
// chain(decayed_weights(1e-4), sgd({.momentum = 0.9})) is PyTorch's SGD with weight_decay).
// The rules themselves live in optim/rules/.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/tensor/rule_math.hpp"

#include <Eigen/Core>

#include <array>        // fields, domains
#include <cmath>        // isfinite
#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf for describe
#include <string>       // describe
#include <string_view>  // names
#include <tuple>        // chain
#include <type_traits>  // traits
#include <utility>      // index_sequence

namespace nitro::optim {

// What values a field accepts. Checked at setup for every value a schedule will produce.
enum class domain { any, nonnegative, positive, unit_open, unit_closed };
constexpr bool in_domain(domain d, double v) noexcept {
  if (!(v == v) || v - v != 0) return false;  // NaN or infinite
  switch (d) {
    case domain::any: return true;
    case domain::nonnegative: return v >= 0;
    case domain::positive: return v > 0;
    case domain::unit_open: return v >= 0 && v < 1;
    case domain::unit_closed: return v >= 0 && v <= 1;
  }
  return false;
}
constexpr char const* to_string(domain d) noexcept {
  switch (d) {
    case domain::any: return "a finite number";
    case domain::nonnegative: return ">= 0";
    case domain::positive: return "> 0";
    case domain::unit_open: return "in [0, 1)";
    case domain::unit_closed: return "in [0, 1]";
  }
  return "?";
}

// Compile-time names of a rule's fields or states. The lists are combined through member aliases
// rather than partial specialisations that deduce the names: nvcc's front end cannot deduce a pack
// of class-type template parameters (fixed_string<5>, fixed_string<3>, ...), and the CUDA backend
// compiles these rules.
template <fixed_string... N>
struct field_names {
  static constexpr std::size_t size = sizeof...(N);
  template <fixed_string Head> using prefixed = field_names<join(Head, '.', N)...>;  // Head.n for every n
  using headless = field_names<without_head<N>()...>;                               // every n without its first segment
  template <fixed_string... Before> using after = field_names<Before..., N...>;
  template <class Next> using then = typename Next::template after<N...>;           // these names, then Next's
  static constexpr std::array<std::string_view, sizeof...(N)> views{N.view()...};
  using diagnostic = opt_fields<str_of<N>...>;
  static constexpr int index_of(std::string_view name) noexcept {
    for (std::size_t i = 0; i < size; ++i)
      if (views[i] == name) return static_cast<int>(i);
    return -1;
  }
};

// A field's path inside its rule names the rule around it: "adamw.beta1", "sam.adamw.beta1",
// "sam.rho", "chain.2.momentum" (a chain names its rules by position, from 1 as chain layers are).
// A key or a lookup names a field by its path or by any tail of it that starts at a segment:
// "beta1", "adamw.beta1" and "sam.adamw.beta1" all name sam(adamw)'s beta1; in chain(sgd, sgd)
// "momentum" names two fields, and "2.momentum" or "chain.2.momentum" one.
constexpr bool names_path(std::string_view path, std::string_view name) noexcept {
  if (name.empty() || !path.ends_with(name)) return false;
  return path.size() == name.size() || path[path.size() - name.size() - 1] == '.';
}
template <class Paths>
constexpr std::size_t paths_named(std::string_view name) noexcept {  // how many of Paths `name` names
  std::size_t n = 0;
  for (auto p : Paths::views) n += names_path(p, name);
  return n;
}
template <class Paths>
constexpr int first_path_named(std::string_view name) noexcept {
  for (std::size_t i = 0; i < Paths::size; ++i)
    if (names_path(Paths::views[i], name)) return static_cast<int>(i);
  return -1;
}
namespace detail {
template <class... L> struct concat_names { using type = field_names<>; };
template <class L> struct concat_names<L> { using type = L; };
template <class A, class B, class... R>
struct concat_names<A, B, R...> {
  using type = typename concat_names<typename A::template then<B>, R...>::type;
};

// Head.p for every path p.
template <fixed_string Head, class Paths> using prefixed_t = typename Paths::template prefixed<Head>;
// every path without its first segment
template <class Paths> struct headless { using type = typename Paths::headless; };

inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
template <class Fields>
std::string describe_fields(double const* f, std::size_t skip_last = 0) {
  std::string s;
  for (std::size_t i = 0; i + skip_last < Fields::size; ++i)
    s += (i ? ", " : "") + std::string(Fields::views[i]) + "=" + format_number(f[i]);
  return s;
}
}  // namespace detail

// One block of a group's span, as a rule sees it (pointers at the block's first element).
inline constexpr std::int64_t block_size = 512;
struct block {
  float* u;              // the direction: the scaled gradient in, the rule's output out
  float const* w;        // the weights
  float const* a;        // the decay anchor; nullptr when it is zero
  float* const* state;   // the rule's state buffers
  float* scratch;        // block_size floats the rule may use
  std::int64_t n;        // elements, at most block_size
};

namespace detail {
using array_map = Eigen::Map<Eigen::ArrayXf>;
using const_array_map = Eigen::Map<const Eigen::ArrayXf>;
inline array_map arr(float* p, std::int64_t n) noexcept { return array_map(p, static_cast<Eigen::Index>(n)); }
inline const_array_map arr(float const* p, std::int64_t n) noexcept { return const_array_map(p, static_cast<Eigen::Index>(n)); }
}  // namespace detail

// The paths of a rule's fields (see names_path): R::paths, or its field names for a rule that
// gives none.
template <class R> struct rule_paths { using type = typename R::fields; };
template <class R>
  requires requires { typename R::paths; }
struct rule_paths<R> { using type = typename R::paths; };
template <class R> using rule_paths_t = typename rule_paths<R>::type;

// A rule: the interface above, checked where a rule is required.
template <class R>
concept rule = requires(R const& r, double const* f, float& u, float* s) {
  typename R::fields;
  typename R::states;
  typename R::consts;
  { R::domains.size() } -> std::convertible_to<std::size_t>;
  { r.values.size() } -> std::convertible_to<std::size_t>;
  { r.default_lambda } -> std::convertible_to<double>;
  { r.prepare(f, std::int64_t{1}) } -> std::same_as<typename R::consts>;
  { R::template element<true, true>(std::declval<typename R::consts const&>(), u, 0.0f, 0.0f, s) } -> std::same_as<void>;
  { r.describe(f) } -> std::convertible_to<std::string>;
} && (R::fields::size == R::domains.size()) && (R::fields::size == rule_paths<R>::type::size);

// One block of a rule: its vectorised apply where it has one, else its element function per element
// (the states gathered into the element's own array, as the CUDA kernel does).
template <class R, bool Decay, bool Anchor>
void apply_rule(typename R::consts const& k, block const& b) noexcept {
  if constexpr (requires { R::template apply<Decay, Anchor>(k, b); }) {
    R::template apply<Decay, Anchor>(k, b);
  } else {
    constexpr std::size_t S = R::states::size;
    for (std::int64_t i = 0; i < b.n; ++i) {
      float s[S > 0 ? S : 1];
      for (std::size_t j = 0; j < S; ++j) s[j] = b.state[j][i];
      R::template element<Decay, Anchor>(k, b.u[i], b.w[i], Anchor ? b.a[i] : 0.0f, s);
      for (std::size_t j = 0; j < S; ++j) b.state[j][i] = s[j];
    }
  }
}

// SAM-wrapped rules say so (sam.hpp); plain rules do not perturb.
template <class R> struct perturbs : std::false_type {};

// ---- chain --------------------------------------------------------------------------------------
namespace detail {
template <std::size_t I, class Paths>
using chain_position_paths = prefixed_t<join(fixed_string{"chain"}, '.', number_text<I + 1>()), typename Paths::headless>;
template <class Positions, class... Paths> struct chain_paths;
template <std::size_t... I, class... Paths>
struct chain_paths<std::index_sequence<I...>, Paths...> {
  using type = typename concat_names<chain_position_paths<I, Paths>...>::type;
};
}  // namespace detail

template <class... R>
struct chain_rule {
  static_assert(sizeof...(R) >= 1, "E-OPT-020: nitro::optim::chain() is given no rule. Fix: chain(decayed_weights(0.01), adam(...)); a single rule needs no chain.");
  static_assert((rule<R> && ...), "E-OPT-021: an argument of nitro::optim::chain(...) is not a rule. Fix: pass rules: sgd, adam, adamw, lion, decayed_weights or a chain.");
  static_assert(!(perturbs<R>::value || ...),
                "E-OPT-022: SAM wraps a whole rule, and here it is inside a chain. Fix: write sam(chain(...)), not chain(sam(...)).");

  using fields = typename detail::concat_names<typename R::fields...>::type;
  using states = typename detail::concat_names<typename R::states...>::type;
  // chain.<position>.<the rule's path without its name>: chain.2.momentum
  using paths = typename detail::chain_paths<std::index_sequence_for<R...>, rule_paths_t<R>...>::type;
  static constexpr auto domains = [] {
    std::array<domain, fields::size> d{};
    std::size_t k = 0;
    ((void)[&] { for (auto x : R::domains) d[k++] = x; }(), ...);
    return d;
  }();
  static constexpr std::array<std::size_t, sizeof...(R)> field_offset = [] {
    std::array<std::size_t, sizeof...(R)> o{};
    std::size_t k = 0, i = 0;
    ((o[i++] = k, k += R::fields::size), ...);
    return o;
  }();
  static constexpr std::array<std::size_t, sizeof...(R)> state_offset = [] {
    std::array<std::size_t, sizeof...(R)> o{};
    std::size_t k = 0, i = 0;
    ((o[i++] = k, k += R::states::size), ...);
    return o;
  }();

  std::tuple<R...> rules;
  std::array<double, fields::size> values{};
  double default_lambda = 0;

  constexpr chain_rule() = default;
  constexpr explicit chain_rule(R... r) : rules(r...) {
    std::size_t k = 0;
    ((void)[&] { for (double v : r.values) values[k++] = v; }(), ...);
    ((default_lambda = default_lambda != 0 ? default_lambda : r.default_lambda), ...);
  }

  using consts = std::tuple<typename R::consts...>;
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t t) const { return prepare_each(f, t, std::index_sequence_for<R...>{}); }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float w, float a, float* s) noexcept {
    element_each<Decay, Anchor>(k, u, w, a, s, std::index_sequence_for<R...>{});
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (apply_rule<std::tuple_element_t<I, std::tuple<R...>>, Decay, Anchor>(std::get<I>(k), block{b.u, b.w, b.a, b.state + state_offset[I], b.scratch, b.n}),
       ...);
    }(std::index_sequence_for<R...>{});
  }
  std::string describe(double const* f) const {
    std::string s = "chain(";
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((s += (I ? ", " : "") + std::get<I>(rules).describe(f + field_offset[I])), ...);
    }(std::index_sequence_for<R...>{});
    return s + ")";
  }

 private:
  // The offsets as constants: the device reads no host array.
  template <std::size_t... I>
  NITRO_HD_INLINE consts prepare_each(double const* f, std::int64_t t, std::index_sequence<I...>) const {
    return consts{std::get<I>(rules).prepare(f + std::integral_constant<std::size_t, field_offset[I]>::value, t)...};
  }
  template <bool Decay, bool Anchor, std::size_t... I>
  static NITRO_HD_INLINE void element_each(consts const& k, float& u, float w, float a, float* s, std::index_sequence<I...>) noexcept {
    (std::tuple_element_t<I, std::tuple<R...>>::template element<Decay, Anchor>(std::get<I>(k), u, w, a,
                                                                                s + std::integral_constant<std::size_t, state_offset[I]>::value),
     ...);
  }
};

// chain(r1, r2, ...): r1's output is r2's input.
template <class... R>
constexpr chain_rule<R...> chain(R... r) { return chain_rule<R...>(r...); }

}  // namespace nitro::optim
