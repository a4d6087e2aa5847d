// nitro/knobs/slug.hpp — a run's folder name shows its selection.
//
//   fashion_mlp-small-lr=0.002-20250107-141502-3fa2
//   ^experiment ^variant ^each --set, in order  ^id (time, then 4 hex digits; or --id)
//
// The experiment's name is written in snake case (FashionMLP -> fashion_mlp). Characters a file
// name should not hold become '_'; a very long selection is shortened and keeps a hash of the
// whole, so two selections never share a slug stem by accident.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/rng.hpp"
#include "nitro/knobs/selection.hpp"

#include <cctype>   // isupper, islower, isdigit
#include <chrono>   // the id's time and entropy
#include <cstdio>   // snprintf
#include <ctime>    // localtime_r, strftime
#include <string>   // slugs

#include <unistd.h>  // getpid

namespace nitro {

// FashionMLP -> fashion_mlp, HTTPServer -> http_server, fashion_mlp -> fashion_mlp.
NITRO_RUNTIME_INLINE std::string snake_case(std::string_view name);

namespace detail {
NITRO_RUNTIME_INLINE std::string slug_safe(std::string_view v);
}  // namespace detail

// A new run id: local time to the second, then 4 hex digits that differ between processes.
NITRO_RUNTIME_INLINE std::string make_run_id();

// The slug stem (everything but the id): experiment, variant, each --set.
NITRO_RUNTIME_INLINE std::string slug_stem(std::string_view experiment, selection_request const& r);

NITRO_RUNTIME_INLINE std::string make_slug(std::string_view experiment, selection_request const& r, std::string const& id);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE std::string snake_case(std::string_view name) {
  std::string s;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool up = std::isupper(static_cast<unsigned char>(c));
    if (up && i > 0) {
      const char p = name[i - 1];
      const bool prev_lower = std::islower(static_cast<unsigned char>(p)) || std::isdigit(static_cast<unsigned char>(p));
      const bool next_lower = i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
      if ((prev_lower || (std::isupper(static_cast<unsigned char>(p)) && next_lower)) && s.back() != '_') s += '_';
    }
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

}  // namespace nitro

namespace nitro::detail {

NITRO_RUNTIME_INLINE std::string slug_safe(std::string_view v) {
  std::string s;
  for (char c : v) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-' || c == '=';
    s += ok ? c : '_';
  }
  return s;
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE std::string make_run_id() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
  static std::uint64_t counter = 0;
  const std::uint64_t ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  const std::uint64_t h = fold(fold(ns, static_cast<std::uint64_t>(::getpid())), ++counter);
  char tail[8];
  std::snprintf(tail, sizeof tail, "%04x", static_cast<unsigned>(h & 0xffff));
  return std::string(when) + "-" + tail;
}

NITRO_RUNTIME_INLINE std::string slug_stem(std::string_view experiment, selection_request const& r) {
  std::string s = snake_case(experiment);
  if (r.variant) {
    s += '-';
    s += detail::slug_safe(*r.variant);
  }
  for (auto const& [k, v] : r.sets) {
    s += '-';
    s += detail::slug_safe(k);
    s += '=';
    s += detail::slug_safe(v);
  }
  if (s.size() > 120) {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (char c : s) h = fold(h, static_cast<unsigned char>(c));
    char hex[20];
    std::snprintf(hex, sizeof hex, "%08llx", static_cast<unsigned long long>(h & 0xffffffffULL));
    s = s.substr(0, 110) + "~" + hex;
  }
  return s;
}

NITRO_RUNTIME_INLINE std::string make_slug(std::string_view experiment, selection_request const& r, std::string const& id) {
  return slug_stem(experiment, r) + "-" + detail::slug_safe(id);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
