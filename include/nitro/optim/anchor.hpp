// nitro/optim/anchor.hpp — where decoupled decay pulls a group's weights: zero, w0, or given values.
//
//   auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::w0; }     // toward the start
//   auto decay_anchor(nitro::group<"head">) const { return nitro::anchor::zero; }      // the default
//   auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::values(pretrained); }
//
// zero: w <- w - eta*lambda*w (classic weight decay). w0: toward the group's weights at the start
// of training — build_model's initialisation, unless the handle was given nitro::kw::w0 = tree.
// values(source): toward given weights, where source is a tree of tensors shaped like ps (looked
// up by keypath) or a callable `Tensor(std::string_view keypath)`; every decayed leaf of the group
// must be found with its shape (coded error E-OPT-013 at setup otherwise). An anchor other than
// zero costs one flat buffer of the group's size, filled once.
#pragma once

#include "nitro/core/meta.hpp"

#include <string_view>  // names
#include <type_traits>  // traits

namespace nitro::anchor {

struct zero_t { static constexpr std::string_view name = "zero"; };
struct w0_t { static constexpr std::string_view name = "w0"; };
template <class Source>
struct values_t {
  static constexpr std::string_view name = "values";
  Source source;
};

inline constexpr zero_t zero{};
inline constexpr w0_t w0{};
template <class Source>
values_t<std::remove_cvref_t<Source>> values(Source&& source) { return {static_cast<Source&&>(source)}; }

}  // namespace nitro::anchor

namespace nitro::optim {
template <class A> struct is_anchor : std::false_type {};
template <> struct is_anchor<anchor::zero_t> : std::true_type {};
template <> struct is_anchor<anchor::w0_t> : std::true_type {};
template <class S> struct is_anchor<anchor::values_t<S>> : std::true_type {};
}  // namespace nitro::optim
