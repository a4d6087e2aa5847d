// nitro/knobs/sweep_points.hpp — a sweep's points: the cross product of its axes, last axis fastest.
//
//   auto points = nitro::sweep_points(cat, "deep-lr", extra);   // one selection_request per point
//
// Every point starts from the sweep's base variant (or the --variant given to `sweep` when the
// sweep names none), carries the command line's other --set values, then one --set per axis.
// A --set on an axis knob, or a --variant that contradicts the sweep's base, is E-KNOB-013; an
// unknown sweep is E-KNOB-012 with a did-you-mean.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/detail/did_you_mean.hpp"
#include "nitro/knobs/selection.hpp"

#include <cstddef>  // size_t
#include <string>   // names
#include <vector>   // points

namespace nitro {

NITRO_RUNTIME_INLINE sweep_info const& find_sweep_or_throw(catalog const& c, std::string const& name);

NITRO_RUNTIME_INLINE std::vector<selection_request> sweep_points(catalog const& c, std::string const& name, selection_request const& extra);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE sweep_info const& find_sweep_or_throw(catalog const& c, std::string const& name) {
  if (sweep_info const* s = c.find_sweep(name)) return *s;
  std::string near = detail::did_you_mean(name, c.sweep_names());
  throw error("E-KNOB-012",
              "`sweep` names '" + name + "', which the experiment does not declare" +
                  (near.empty() ? std::string() : "; did you mean '" + near + "'?"),
              c.sweeps.empty() ? "the experiment declares no sweeps; add `static constexpr auto sweeps()` to it"
                               : "name one of its sweeps: " + detail::join_names(c.sweep_names()) + " (see `variants`)");
}

NITRO_RUNTIME_INLINE std::vector<selection_request> sweep_points(catalog const& c, std::string const& name, selection_request const& extra) {
  sweep_info const& sw = find_sweep_or_throw(c, name);
  selection_request base = extra;
  if (!sw.base.empty()) {
    if (extra.variant && *extra.variant != sw.base)
      throw error("E-KNOB-013", "the sweep '" + sw.name + "' runs every point on the variant '" + sw.base + "', but --variant asks for '" +
                                    *extra.variant + "'",
                  "drop --variant (variants do not compose), or declare a sweep on the variant you want");
    base.variant = sw.base;
  }
  for (auto const& [k, v] : extra.sets)
    for (auto const& a : sw.axes)
      if (a.knob == k)
        throw error("E-KNOB-013", "--set " + k + "=" + v + " contradicts the sweep '" + sw.name + "', whose axis sets " + k,
                    "drop --set " + k + ", or run the one point with `run --set " + k + "=" + v + "`");

  std::vector<selection_request> points;
  const std::size_t n = sw.points();
  for (std::size_t p = 0; p < n; ++p) {
    selection_request r = base;
    // mixed radix, the last axis varying fastest
    std::vector<std::size_t> idx(sw.axes.size());
    std::size_t rest = p;
    for (std::size_t a = sw.axes.size(); a-- > 0;) {
      idx[a] = rest % sw.axes[a].values.size();
      rest /= sw.axes[a].values.size();
    }
    for (std::size_t a = 0; a < sw.axes.size(); ++a) r.sets.emplace_back(sw.axes[a].knob, sw.axes[a].values[idx[a]].str());
    resolve_selection(c, r);  // every point must resolve before the first one runs
    points.push_back(std::move(r));
  }
  return points;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
