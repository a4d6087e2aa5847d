// nitro/knobs/knob_value.hpp — a knob's value at run time: its kind, its text, its JSON.
//
// A knob is an experiment field or a run keyword, so its C++ type is one of a few kinds:
//   boolean   bool                         true | false (also 1 | 0)
//   integer   a signed integral type       -12, 128 (range-checked against the field's type)
//   unsigned  an unsigned integral type    0, 42
//   real32    float                        0.002, 1e-3 (printed as the shortest float that reads back)
//   real64    double                       0.002
//   text      std::string                  anything
// The command line gives text; `parse_knob_value` turns it into a value of the knob's kind or
// explains which texts it accepts. Values print the same way everywhere (variants, explain, slugs,
// manifests), so what a user reads is what `--set` takes back.
#pragma once

#include "nitro/core/error.hpp"

#include <nlohmann/json.hpp>

#include <charconv>     // from_chars, to_chars: exact, locale-free
#include <cmath>        // isfinite
#include <cstdint>      // int64_t, uint64_t
#include <limits>       // ranges
#include <string>       // text
#include <string_view>  // input
#include <system_error> // errc

namespace nitro {

enum class knob_kind { boolean, integer, unsigned_integer, real32, real64, text };

constexpr char const* to_string(knob_kind k) noexcept {
  switch (k) {
    case knob_kind::boolean: return "bool";
    case knob_kind::integer: return "integer";
    case knob_kind::unsigned_integer: return "unsigned integer";
    case knob_kind::real32: return "float";
    case knob_kind::real64: return "double";
    case knob_kind::text: return "string";
  }
  return "?";
}

// The kind of a C++ scalar type that can be a knob (anything else is not a knob type).
template <class T>
constexpr bool is_knob_scalar_v = std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_same_v<T, float> ||
                                  std::is_same_v<T, double> || std::is_same_v<T, std::string>;

template <class T>
constexpr knob_kind knob_kind_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) return knob_kind::boolean;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return knob_kind::integer;
  else if constexpr (std::is_integral_v<T>) return knob_kind::unsigned_integer;
  else if constexpr (std::is_same_v<T, float>) return knob_kind::real32;
  else if constexpr (std::is_same_v<T, double>) return knob_kind::real64;
  else return knob_kind::text;
}

// One value of a knob. Only the member of its kind is meaningful.
struct knob_value {
  knob_kind kind = knob_kind::integer;
  bool b = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
  std::string s;

  static knob_value boolean(bool v) { knob_value x; x.kind = knob_kind::boolean; x.b = v; return x; }
  static knob_value integer(std::int64_t v) { knob_value x; x.kind = knob_kind::integer; x.i = v; return x; }
  static knob_value unsigned_integer(std::uint64_t v) { knob_value x; x.kind = knob_kind::unsigned_integer; x.u = v; return x; }
  static knob_value real32(float v) { knob_value x; x.kind = knob_kind::real32; x.d = v; return x; }
  static knob_value real64(double v) { knob_value x; x.kind = knob_kind::real64; x.d = v; return x; }
  static knob_value text(std::string v) { knob_value x; x.kind = knob_kind::text; x.s = std::move(v); return x; }

  // From a C++ value of a knob type.
  template <class T>
  static knob_value of(T const& v) {
    constexpr knob_kind k = knob_kind_of<T>();
    if constexpr (k == knob_kind::boolean) return boolean(v);
    else if constexpr (k == knob_kind::integer) return integer(static_cast<std::int64_t>(v));
    else if constexpr (k == knob_kind::unsigned_integer) return unsigned_integer(static_cast<std::uint64_t>(v));
    else if constexpr (k == knob_kind::real32) return real32(v);
    else if constexpr (k == knob_kind::real64) return real64(v);
    else return text(v);
  }

  // To a C++ value of a knob type (the caller checked the kind and range).
  template <class T>
  T as() const {
    if constexpr (std::is_same_v<T, std::string>) return s;
    else if constexpr (std::is_same_v<T, bool>) return b;
    else if constexpr (std::is_integral_v<T>) return kind == knob_kind::unsigned_integer ? static_cast<T>(u) : static_cast<T>(i);
    else return static_cast<T>(d);
  }

  // The text `--set` takes back and every listing prints.
  std::string str() const {
    switch (kind) {
      case knob_kind::boolean: return b ? "true" : "false";
      case knob_kind::integer: return std::to_string(i);
      case knob_kind::unsigned_integer: return std::to_string(u);
      case knob_kind::real32: return shortest(static_cast<float>(d));
      case knob_kind::real64: return shortest(d);
      case knob_kind::text: return s;
    }
    return {};
  }

  nlohmann::ordered_json json() const {
    switch (kind) {
      case knob_kind::boolean: return b;
      case knob_kind::integer: return i;
      case knob_kind::unsigned_integer: return u;
      case knob_kind::real32: return std::stod(shortest(static_cast<float>(d)));  // 0.001, not 0.0010000000474974513
      case knob_kind::real64: return d;
      case knob_kind::text: return s;
    }
    return nullptr;
  }

  friend bool operator==(knob_value const& a, knob_value const& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case knob_kind::boolean: return a.b == b.b;
      case knob_kind::integer: return a.i == b.i;
      case knob_kind::unsigned_integer: return a.u == b.u;
      case knob_kind::real32: return static_cast<float>(a.d) == static_cast<float>(b.d);
      case knob_kind::real64: return a.d == b.d;
      case knob_kind::text: return a.s == b.s;
    }
    return false;
  }

  template <class F>
  static std::string shortest(F v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
};

// The range of values a knob of C++ type T holds (integers only; reals are checked for finiteness).
struct knob_range {
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  std::uint64_t uhi = std::numeric_limits<std::uint64_t>::max();

  template <class T>
  static constexpr knob_range of() noexcept {
    knob_range r;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (std::is_signed_v<T>) {
        r.lo = static_cast<std::int64_t>(std::numeric_limits<T>::min());
        r.hi = static_cast<std::int64_t>(std::numeric_limits<T>::max());
      } else {
        r.lo = 0;
        r.uhi = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
      }
    }
    return r;
  }
};

// What texts a knob of this kind accepts, for messages.
inline std::string accepted_texts(knob_kind k, knob_range const& r) {
  switch (k) {
    case knob_kind::boolean: return "true or false (also 1 or 0)";
    case knob_kind::integer: return "a whole number from " + std::to_string(r.lo) + " to " + std::to_string(r.hi);
    case knob_kind::unsigned_integer: return "a whole number from 0 to " + std::to_string(r.uhi);
    case knob_kind::real32: return "a finite decimal number that fits a float, such as 0.002 or 1e-3";
    case knob_kind::real64: return "a finite decimal number, such as 0.002 or 1e-3";
    case knob_kind::text: return "any text";
  }
  return {};
}

// Parses `text` as a value of the knob `name`; E-KNOB-010 names the accepted texts when it does not.
// `where` says where the text came from (--set, a variant, a recorded run) for the message.
inline knob_value parse_knob_value(std::string_view name, knob_kind kind, knob_range const& range, std::string_view text,
                                   std::string_view where = "--set") {
  auto fail = [&]() -> knob_value {
    throw error("E-KNOB-010",
                std::string(where) + " gives the knob '" + std::string(name) + "' the value '" + std::string(text) +
                    "', which is not a valid " + to_string(kind),
                "give " + accepted_texts(kind, range) + ", e.g. --set " + std::string(name) + "=" +
                    (kind == knob_kind::boolean ? "true" : kind == knob_kind::text ? "value" :
                     kind == knob_kind::real32 || kind == knob_kind::real64 ? "0.5" : "1"));
  };
  char const* first = text.data();
  char const* last = text.data() + text.size();
  switch (kind) {
    case knob_kind::boolean:
      if (text == "true" || text == "1") return knob_value::boolean(true);
      if (text == "false" || text == "0") return knob_value::boolean(false);
      return fail();
    case knob_kind::integer: {
      if (text.empty()) return fail();
      if (*first == '+') ++first;
      std::int64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec != std::errc{} || r.ptr != last || v < range.lo || v > range.hi) return fail();
      return knob_value::integer(v);
    }
    case knob_kind::unsigned_integer: {
      if (text.empty()) return fail();
      if (*first == '+') ++first;
      if (first != last && *first == '-') return fail();
      std::uint64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec != std::errc{} || r.ptr != last || v > range.uhi) return fail();
      return knob_value::unsigned_integer(v);
    }
    case knob_kind::real32:
    case knob_kind::real64: {
      if (text.empty()) return fail();
      if (*first == '+') ++first;
      double v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec != std::errc{} || r.ptr != last || !std::isfinite(v)) return fail();
      if (kind == knob_kind::real32) {
        if (std::abs(v) > static_cast<double>(std::numeric_limits<float>::max())) return fail();
        return knob_value::real32(static_cast<float>(v));
      }
      return knob_value::real64(v);
    }
    case knob_kind::text:
      return knob_value::text(std::string(text));
  }
  return fail();
}

// A JSON value (from a manifest) back into a knob value of `kind`; nullopt-like failure as E-KNOB-010.
inline knob_value knob_value_from_json(std::string_view name, knob_kind kind, knob_range const& range,
                                       nlohmann::ordered_json const& j, std::string_view where) {
  if (kind == knob_kind::text && j.is_string()) return knob_value::text(j.get<std::string>());
  if (kind == knob_kind::boolean && j.is_boolean()) return knob_value::boolean(j.get<bool>());
  std::string text = j.is_string() ? j.get<std::string>() : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return parse_knob_value(name, kind, range, text, where);
}

}  // namespace nitro
