// nitro/knobs/knob_value.hpp — a knob's value at run time: its kind, its text, its JSON.
//
// A knob is an experiment field or a run keyword, so its C++ type is one of a few kinds:
//   boolean   bool                         true | false (also 1 | 0)
//   integer   a signed integral type       -12, 128 (range-checked against the field's type)
//   unsigned  an unsigned integral type    0, 42
//   real32    float                        0.002, 1e-3 (printed as the shortest float that reads back)
//   real64    double                       0.002
//   text      std::string                  anything
//   symbol    an enum NITRO_KNOB_ENUM names adamw | sgd (also :sgd, the note's keyword spelling)
//   list      std::vector / std::array of  [64,32] or 64,32 (an array takes exactly its length)
//             numbers
// The command line gives text; `parse_knob_value` turns it into a value of the knob's kind or
// explains which texts it accepts. Values print the same way everywhere (variants, explain, slugs,
// manifests), so what a user reads is what `--set` takes back.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/knobs/symbols.hpp"

#include <nlohmann/json.hpp>

#include <array>        // list knobs of a fixed length
#include <charconv>     // from_chars, to_chars: exact, locale-free
#include <cmath>        // isfinite
#include <cstdint>      // int64_t, uint64_t
#include <limits>       // ranges
#include <span>         // a symbol knob's names
#include <string>       // text
#include <string_view>  // input
#include <system_error> // errc
#include <type_traits>  // kinds
#include <vector>       // list knobs

namespace nitro {

enum class knob_kind { boolean, integer, unsigned_integer, real32, real64, text, symbol, list };

constexpr char const* to_string(knob_kind k) noexcept {
  switch (k) {
    case knob_kind::boolean: return "bool";
    case knob_kind::integer: return "integer";
    case knob_kind::unsigned_integer: return "unsigned integer";
    case knob_kind::real32: return "float";
    case knob_kind::real64: return "double";
    case knob_kind::text: return "string";
    case knob_kind::symbol: return "symbol";
    case knob_kind::list: return "list";
  }
  return "?";
}

// The kind of a C++ scalar type that can be a knob.
template <class T>
constexpr bool is_knob_scalar_v = std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_same_v<T, float> ||
                                  std::is_same_v<T, double> || std::is_same_v<T, std::string>;

// A list of numbers: std::vector<X> (any length) or std::array<X, N> (exactly N), X a number.
template <class T> struct knob_list_traits { static constexpr bool list = false; };
template <class X> constexpr bool knob_number_v = std::is_arithmetic_v<X> && !std::is_same_v<X, bool>;
template <class X, class A>
struct knob_list_traits<std::vector<X, A>> {
  static constexpr bool list = knob_number_v<X>;
  using element = X;
  static constexpr std::size_t length = 0;  // any
};
template <class X, std::size_t N>
struct knob_list_traits<std::array<X, N>> {
  static constexpr bool list = knob_number_v<X> && N > 0;
  using element = X;
  static constexpr std::size_t length = N;
};

// Can a field of C++ type T be a knob? A scalar, a described enum, or a list of numbers.
template <class T>
constexpr bool is_knob_type_v = is_knob_scalar_v<T> || is_knob_symbol_v<T> || knob_list_traits<T>::list;

template <class T>
constexpr knob_kind knob_kind_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) return knob_kind::boolean;
  else if constexpr (std::is_enum_v<T>) return knob_kind::symbol;
  else if constexpr (knob_list_traits<T>::list) return knob_kind::list;
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
  std::string s;                  // text; a symbol's name
  std::vector<knob_value> items;  // list: one number each

  static knob_value boolean(bool v) { knob_value x; x.kind = knob_kind::boolean; x.b = v; return x; }
  static knob_value integer(std::int64_t v) { knob_value x; x.kind = knob_kind::integer; x.i = v; return x; }
  static knob_value unsigned_integer(std::uint64_t v) { knob_value x; x.kind = knob_kind::unsigned_integer; x.u = v; return x; }
  static knob_value real32(float v) { knob_value x; x.kind = knob_kind::real32; x.d = v; return x; }
  static knob_value real64(double v) { knob_value x; x.kind = knob_kind::real64; x.d = v; return x; }
  static knob_value text(std::string v) { knob_value x; x.kind = knob_kind::text; x.s = std::move(v); return x; }
  static knob_value symbol(std::string v) { knob_value x; x.kind = knob_kind::symbol; x.s = std::move(v); return x; }
  static knob_value list(std::vector<knob_value> v) { knob_value x; x.kind = knob_kind::list; x.items = std::move(v); return x; }

  // From a C++ value of a knob type.
  template <class T>
  static knob_value of(T const& v) {
    constexpr knob_kind k = knob_kind_of<T>();
    if constexpr (k == knob_kind::boolean) return boolean(v);
    else if constexpr (k == knob_kind::integer) return integer(static_cast<std::int64_t>(v));
    else if constexpr (k == knob_kind::unsigned_integer) return unsigned_integer(static_cast<std::uint64_t>(v));
    else if constexpr (k == knob_kind::real32) return real32(v);
    else if constexpr (k == knob_kind::real64) return real64(v);
    else if constexpr (k == knob_kind::symbol) {
      const std::string_view n = symbol_name(v);  // a value no table lists prints as its number
      return symbol(n.empty() ? std::to_string(static_cast<std::underlying_type_t<T>>(v)) : std::string(n));
    } else if constexpr (k == knob_kind::list) {
      std::vector<knob_value> xs;
      xs.reserve(std::size(v));
      for (auto const& x : v) xs.push_back(of(x));
      return list(std::move(xs));
    } else return text(v);
  }

  // To a C++ value of a knob type (the caller checked the kind, range, names and length).
  template <class T>
  T as() const {
    if constexpr (std::is_same_v<T, std::string>) return s;
    else if constexpr (std::is_enum_v<T>) {
      for (auto const& sym : knob_symbols<T>)
        if (sym.name == s) return sym.value;
      return T{};
    } else if constexpr (knob_list_traits<T>::list) {
      using X = typename knob_list_traits<T>::element;
      T out{};
      if constexpr (knob_list_traits<T>::length == 0) {
        out.reserve(items.size());
        for (auto const& x : items) out.push_back(x.template as<X>());
      } else {
        for (std::size_t n = 0; n < out.size() && n < items.size(); ++n) out[n] = items[n].template as<X>();
      }
      return out;
    }
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
      case knob_kind::text:
      case knob_kind::symbol: return s;
      case knob_kind::list: {
        std::string t = "[";
        for (std::size_t n = 0; n < items.size(); ++n) {
          if (n) t += ',';
          t += items[n].str();
        }
        return t + "]";
      }
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
      case knob_kind::text:
      case knob_kind::symbol: return s;
      case knob_kind::list: {
        auto a = nlohmann::ordered_json::array();
        for (auto const& x : items) a.push_back(x.json());
        return a;
      }
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
      case knob_kind::text:
      case knob_kind::symbol: return a.s == b.s;
      case knob_kind::list: return a.items == b.items;
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

// The values a knob of C++ type T holds beyond its kind: an integer's range (reals are checked for
// finiteness), a symbol's names, a list's element kind and range and, for an array, its length.
struct knob_range {
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  std::uint64_t uhi = std::numeric_limits<std::uint64_t>::max();
  std::span<std::string_view const> symbols{};  // symbol: every name, in declared order
  knob_kind element = knob_kind::real64;         // list: each item's kind (lo/hi/uhi its range)
  std::size_t length = 0;                        // list: an array's exact length; 0 for any

  template <class T>
  static constexpr knob_range of() noexcept {
    knob_range r;
    if constexpr (std::is_enum_v<T>) {
      r.symbols = symbol_names<T>;
    } else if constexpr (knob_list_traits<T>::list) {
      using X = typename knob_list_traits<T>::element;
      r = of<X>();
      r.element = knob_kind_of<X>();
      r.length = knob_list_traits<T>::length;
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
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

namespace detail {
NITRO_RUNTIME_INLINE std::string joined_symbols(knob_range const& r);
// A value --set takes, for the example in a message.
NITRO_RUNTIME_INLINE std::string example_text(knob_kind k, knob_range const& r);
}  // namespace detail

// What texts a knob of this kind accepts, for messages.
NITRO_RUNTIME_INLINE std::string accepted_texts(knob_kind k, knob_range const& r);

// Parses `text` as a value of the knob `name`; E-KNOB-010 names the accepted texts when it does not.
// `where` says where the text came from (--set, a variant, a recorded run) for the message.
NITRO_RUNTIME_INLINE knob_value parse_knob_value(std::string_view name, knob_kind kind, knob_range const& range, std::string_view text,
                                   std::string_view where = "--set");

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE std::string joined_symbols(knob_range const& r) {
  std::string s;
  for (std::size_t n = 0; n < r.symbols.size(); ++n) s += (n ? ", " : "") + std::string(r.symbols[n]);
  return s;
}

NITRO_RUNTIME_INLINE std::string example_text(knob_kind k, knob_range const& r) {
  switch (k) {
    case knob_kind::boolean: return "true";
    case knob_kind::text: return "value";
    case knob_kind::real32:
    case knob_kind::real64: return "0.5";
    case knob_kind::symbol: return r.symbols.empty() ? "name" : std::string(r.symbols.back());
    case knob_kind::list: {
      const std::string x = example_text(r.element, r);
      std::string s = "[" + x;
      for (std::size_t n = 1; n < (r.length ? r.length : 2); ++n) s += "," + x;
      return s + "]";
    }
    default: return "1";
  }
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE std::string accepted_texts(knob_kind k, knob_range const& r) {
  switch (k) {
    case knob_kind::boolean: return "true or false (also 1 or 0)";
    case knob_kind::integer: return "a whole number from " + std::to_string(r.lo) + " to " + std::to_string(r.hi);
    case knob_kind::unsigned_integer: return "a whole number from 0 to " + std::to_string(r.uhi);
    case knob_kind::real32: return "a finite decimal number that fits a float, such as 0.002 or 1e-3";
    case knob_kind::real64: return "a finite decimal number, such as 0.002 or 1e-3";
    case knob_kind::text: return "any text";
    case knob_kind::symbol: return "one of " + detail::joined_symbols(r);
    case knob_kind::list:
      return std::string(r.length ? "a list of exactly " + std::to_string(r.length) + " items" : "a list") +
             " written [a,b] or a,b, each item " + accepted_texts(r.element, r);
  }
  return {};
}

NITRO_RUNTIME_INLINE knob_value parse_knob_value(std::string_view name, knob_kind kind, knob_range const& range, std::string_view text,
                                   std::string_view where) {
  auto fail = [&]() -> knob_value {
    const bool named = kind == knob_kind::symbol;
    throw error("E-KNOB-010",
                std::string(where) + " gives the knob '" + std::string(name) + "' the value '" + std::string(text) +
                    (named ? "', which is not one of its values" : "', which is not a valid " + std::string(to_string(kind))),
                "give " + accepted_texts(kind, range) + ", e.g. --set " + std::string(name) + "=" +
                    detail::example_text(kind, range));
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
    case knob_kind::symbol: {
      const std::string_view n = !text.empty() && text.front() == ':' ? text.substr(1) : text;  // (optimizer :sgd)
      for (std::string_view s : range.symbols)
        if (s == n) return knob_value::symbol(std::string(s));
      return fail();
    }
    case knob_kind::list: {
      std::string_view body = text;
      if (!body.empty() && body.front() == '[') {
        if (body.size() < 2 || body.back() != ']') return fail();
        body = body.substr(1, body.size() - 2);
      }
      auto trim = [](std::string_view v) {
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
        return v;
      };
      std::vector<knob_value> items;
      if (!trim(body).empty()) {
        for (std::size_t at = 0;;) {
          const std::size_t comma = body.find(',', at);
          const std::string_view item = trim(body.substr(at, comma == std::string_view::npos ? body.npos : comma - at));
          try {
            items.push_back(parse_knob_value(name, range.element, range, item, where));
          } catch (error const&) {
            return fail();  // the message names the whole list and what each item takes
          }
          if (comma == std::string_view::npos) break;
          at = comma + 1;
        }
      }
      if (range.length != 0 && items.size() != range.length) return fail();
      return knob_value::list(std::move(items));
    }
  }
  return fail();
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
