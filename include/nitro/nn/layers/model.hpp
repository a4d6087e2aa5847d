// nitro/nn/layers/model.hpp — a model that is a struct of named sub-layers, with its own forward.
//
//   struct TinyLM {
//     nitro::nn::embedding_layer<256, 128> tok;
//     nitro::nn::positional_embedding_layer<64, 128> pos;
//     nitro::nn::repeat_layer<2, Block> blocks;
//     nitro::nn::layer_norm_layer<128> ln_f;
//     nitro::nn::dense_layer<128, 256> head;
//     template <class Net, class X> auto forward(Net& net, X const& tokens) const {
//       auto h = nitro::nn::call<"pos">(net, nitro::nn::call<"tok">(net, tokens));
//       return nitro::nn::call<"head">(net, nitro::nn::call<"ln_f">(net, nitro::nn::call<"blocks">(net, h)));
//     }
//   };
//   NITRO_MODEL(TinyLM, tok, pos, blocks, ln_f, head);
//   auto build_model() const { return nitro::nn::model(TinyLM{}); }
//
// The parameter tree is keyed by the member names, so param_group sees blocks.1.layer_2.weight
// and a checkpoint holds tok.weight. forward is any code: an encoder feeding two heads, a skip
// around a stack, a sub-layer called twice; `call<"name">(net, x)` applies the member `name` with
// its own parameters and state and keeps the state it returns. A name that is not a member is a
// compile error listing the members (E-LAYER-024); a member that is not a layer is one naming it
// (E-LAYER-023). Each member draws its initial values from its own stream, the seed folded with
// its position. The members' own compile-time checks (a chain's neighbours, a residual's body)
// hold inside them; between calls, the layers check what they are given at run time.
//
// Weight tying: `unembed<"tok">(net, h)` reads the embedding member `tok` backwards, as the output
// head (logits = tok.weightᵀ h, nn/layers/embedding.hpp): the model then has no head of its own,
// and the embedding's weight learns from both uses. A member that is not an embedding is
// E-LAYER-025, at compile time.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/nn/layer.hpp"

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <string>   // describe
#include <type_traits>  // type_identity, is_void
#include <utility>  // pair, forward

// A model struct is adapted as an experiment is (every member listed, in order: a member left out
// is a compile error naming it).
#define NITRO_MODEL(Name, ...) NITRO_EXPERIMENT(Name, __VA_ARGS__)

namespace nitro::nn {

template <class Model> struct model_struct {};
template <fixed_string Name> struct member_named { static constexpr auto name = Name; };
template <class Type> struct member_type {};
template <fixed_string... Names> struct members_are {};

template <class Model, class Member, class Type>
struct model_member_not_a_layer_type {
  static_assert(always_false<Model, Member, Type>,
                "E-LAYER-023: a member of a nitro::nn::model(...) struct is not a nitro layer (see model_struct<S>, "
                "member_named<name> and member_type<T> above): every adapted member is a sub-layer whose parameters "
                "the model holds. Fix: make it a layer (dense_layer<In, Out>, a chain_layer, a repeat_layer, ...), or keep "
                "options that are not layers in the experiment.");
  static constexpr bool ok = false;
};
template <class Model, class Member, class Members>
struct model_has_no_member_named {
  static_assert(always_false<Model, Member, Members>,
                "E-LAYER-024: nitro::nn::call<\"name\">(net, x) names no member of the model (see model_struct<S>, "
                "member_named<name> and members_are<...> above). Fix: call one of the members listed, or add the member "
                "(and list it in NITRO_MODEL).");
  static constexpr bool ok = false;
};

template <class Model, class Member, class Type>
struct model_member_is_not_an_embedding {
  static_assert(always_false<Model, Member, Type>,
                "E-LAYER-025: nitro::nn::unembed<\"name\">(net, x) reads an embedding's weight as the output head, and the "
                "member named (see model_struct<S>, member_named<name> and member_type<T> above) is not an embedding. "
                "Fix: name the embedding_layer member whose weight the head shares, or call<\"name\">(net, x) to apply the member.");
  static constexpr bool ok = false;
};

namespace detail {
template <class... F> tree<entry<F::name, typename F::type::param_spec>...> model_params(nitro::detail::type_list<F...>);
template <class... F> tree<entry<F::name, typename F::type::state_spec>...> model_state(nitro::detail::type_list<F...>);

template <class M, class... F>
constexpr bool check_members(nitro::detail::type_list<F...>) {
  auto one = []<class D>(std::type_identity<D>) {
    if constexpr (layer<typename D::type>) return true;
    else return model_member_not_a_layer_type<model_struct<M>, member_named<D::name>, member_type<typename D::type>>::ok;
  };
  return (one(std::type_identity<F>{}) && ...);
}

template <class M, fixed_string Name, class... F>
constexpr bool no_member_named(nitro::detail::type_list<F...>) {
  return model_has_no_member_named<model_struct<M>, member_named<Name>, members_are<F::name...>>::ok;
}

template <fixed_string Name, class... F>
constexpr int member_index(nitro::detail::type_list<F...>) {
  int i = 0, found = -1;
  ((found = found < 0 && F::name.view() == Name.view() ? i : found, ++i), ...);
  return found;
}
}  // namespace detail

// The view forward works through: the model, its parameters and state, the state it returns.
template <class M, class T>
struct model_net {
  using fields = typename experiment_traits<M>::fields;
  using param_spec = decltype(detail::model_params(fields{}));
  using state_spec = decltype(detail::model_state(fields{}));
  M const& model;
  params_t<param_spec, T> const& ps;
  params_t<state_spec, T> const& st;
  params_t<state_spec, T>& st_new;
};

template <class M>
struct model_layer {
  static_assert(experiment<M>,
                "E-LAYER-023: nitro::nn::model(s) takes a struct adapted with NITRO_MODEL(Name, member, ...), whose members "
                "are the sub-layers. Fix: NITRO_MODEL(TinyLM, tok, blocks, head); beside the struct.");
  using fields = typename experiment_traits<M>::fields;
  static_assert(checks_evaluated<detail::check_members<M>(fields{})>);  // E-LAYER-023

  using param_spec = decltype(detail::model_params(fields{}));
  using state_spec = decltype(detail::model_state(fields{}));
  static constexpr std::int64_t in_features = dynamic;
  static constexpr std::int64_t out_features = dynamic;

  using model_type = M;
  M model;

  template <class Ps, class St>
  void init(Ps& ps, St& st, rng& g) const {
    const std::uint64_t base = g();
    std::uint64_t position = 0;
    for_each_field<M>([&](auto d) {
      using D = decltype(d);
      rng member(fold(base, ++position));
      D::get(model).init(get<D::name>(ps), get<D::name>(st), member);
    });
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    params_t<state_spec, T> st_new = st;  // a member forward does not call keeps its state
    model_net<M, T> net{model, ps, st, st_new};
    basic_tensor<T> y = model.forward(net, x);
    return {y, st_new};
  }

  std::string describe() const {
    std::string s = std::string(experiment_traits<M>::name) + "(";
    bool first = true;
    for_each_field<M>([&](auto d) {
      using D = decltype(d);
      s += (first ? "" : ", ") + std::string(D::name.view()) + ": " + D::get(model).describe();
      first = false;
    });
    return s + ")";
  }
};

template <class M>
constexpr model_layer<M> model(M m) {
  return model_layer<M>{m};
}

namespace detail {
// The descriptor of the member `Name` of M (D::name, D::type, D::get), or void after E-LAYER-024
// when M has no such member: the one lookup call<> and unembed<> share.
template <fixed_string Name, class M>
auto member_descriptor() {
  using fields = typename experiment_traits<M>::fields;
  constexpr int i = member_index<Name>(fields{});
  if constexpr (i < 0) {
    static_assert(checks_evaluated<no_member_named<M, Name>(fields{})>);  // E-LAYER-024
    return std::type_identity<void>{};
  } else {
    return decltype(nitro::detail::nth_of<static_cast<std::size_t>(i)>(fields{})){};  // nth_of is declared only
  }
}
template <fixed_string Name, class M> using member_descriptor_t = typename decltype(member_descriptor<Name, M>())::type;
}  // namespace detail

// Applies the member `Name` of the model to x, with its parameters and state; keeps its new state.
template <fixed_string Name, class M, class T, class X>
auto call(model_net<M, T>& net, X const& x) {
  using D = detail::member_descriptor_t<Name, M>;
  if constexpr (std::is_void_v<D>) {
    return x;  // E-LAYER-024 said why
  } else {
    auto [y, s] = D::get(net.model)(x, get<Name>(net.ps), get<Name>(net.st));
    get<Name>(net.st_new) = s;
    return y;
  }
}

// Weight tying: the embedding member `Name` read backwards, logits over its vocabulary from x
// [Dim, ...] (its weight transposed); the model's output head without a weight of its own.
template <fixed_string Name, class M, class T, class X>
auto unembed(model_net<M, T>& net, X const& x) {
  using D = detail::member_descriptor_t<Name, M>;
  if constexpr (std::is_void_v<D>) {
    return x;  // E-LAYER-024 said why
  } else if constexpr (!requires(typename D::type const& l) { l.unembed(x, get<Name>(net.ps)); }) {
    static_assert(checks_evaluated<model_member_is_not_an_embedding<model_struct<M>, member_named<Name>, member_type<typename D::type>>::ok>);  // E-LAYER-025
    return x;
  } else {
    return D::get(net.model).unembed(x, get<Name>(net.ps));
  }
}

}  // namespace nitro::nn
