// nitro/knobs/detail/did_you_mean.hpp — the nearest declared name to a misspelt one.
//
// Edit distance with adjacent transpositions ("lrr" -> "lr", "smlal" -> "small"); a name is
// suggested only when it is close for its length, so a wild guess gets the list instead.
#pragma once

#include "nitro/core/runtime.hpp"

#include <algorithm>    // min
#include <cstddef>      // size_t
#include <string>       // suggestions
#include <string_view>  // names
#include <vector>       // the table

namespace nitro::detail {

NITRO_RUNTIME_INLINE std::size_t edit_distance(std::string_view a, std::string_view b);

// The closest candidate within reach, or "" when none is close enough.
template <class Names>
std::string did_you_mean(std::string_view name, Names const& candidates) {
  std::string best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  const std::size_t reach = std::max<std::size_t>(1, (name.size() + 2) / 3);
  for (auto const& c : candidates) {
    std::string_view cv(c);
    std::size_t d = edit_distance(name, cv);
    if (d < best_d && d <= reach && d < std::max(name.size(), cv.size())) {
      best_d = d;
      best = std::string(cv);
    }
  }
  return best;
}

// "a, b, c" (or `none` for an empty list).
template <class Names>
std::string join_names(Names const& names, std::string_view none = "none") {
  std::string s;
  for (auto const& n : names) {
    if (!s.empty()) s += ", ";
    s += std::string_view(n);
  }
  return s.empty() ? std::string(none) : s;
}

}  // namespace nitro::detail

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

}  // namespace nitro::detail
#endif  // !NITRO_RUNTIME_EXTERN
