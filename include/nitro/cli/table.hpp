// nitro/cli/table.hpp — text tables as the commands print them: columns aligned with two spaces,
// no trailing blanks (so golden files stay exact).
//
//   nitro::cli::table t;
//   t.row({"lr", "0.002", "set"});
//   out << t.str("  ");   // "  lr  0.002  set\n"
#pragma once

#include "nitro/core/runtime.hpp"

#include <algorithm>  // max
#include <cstdio>     // snprintf
#include <string>     // cells
#include <vector>     // rows

namespace nitro::cli {

class table {
 public:
  void row(std::vector<std::string> cells) { m_rows.push_back(std::move(cells)); }
  bool empty() const noexcept { return m_rows.empty(); }

  std::string str(std::string const& indent = "  ") const {
    std::vector<std::size_t> w;
    for (auto const& r : m_rows)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    std::string s;
    for (auto const& r : m_rows) {
      std::string line = indent;
      // the last non-empty cell ends the line
      std::size_t last = r.size();
      while (last > 0 && r[last - 1].empty()) --last;
      for (std::size_t i = 0; i < last; ++i) {
        line += r[i];
        if (i + 1 < last) line += std::string(w[i] - r[i].size() + 2, ' ');
      }
      s += line + "\n";
    }
    return s;
  }

 private:
  std::vector<std::vector<std::string>> m_rows;
};

// A metric as the tables print it: 4 decimals, or an integer when it is one.
NITRO_RUNTIME_INLINE std::string metric_text(double v);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {

NITRO_RUNTIME_INLINE std::string metric_text(double v) {
  char buf[48];
  if (v == static_cast<double>(static_cast<long long>(v)) && v < 1e15 && v > -1e15) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
