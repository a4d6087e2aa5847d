// nitro/knobs/keyword_knobs.hpp — run keywords that can be knobs without being fields.
//
// A knob names an experiment field, or a run keyword (train/keywords.hpp) that the experiment does
// not hold as a field: `nitro::knob<"seed">()` in an experiment without a `seed` field. Such a knob's
// default is what the keyword resolves to without a keyword (the experiment's accessor, else the
// framework's value), and the selected value reaches the handle as the keyword itself
// (`nitro::seed = 3`). The run keywords' table marks which can (`knob`): those whose value a knob holds.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/train/keywords.hpp"

#include <cstdint>  // uint64_t
#include <optional> // a knob nobody selected passes nothing
#include <string>   // run_dir

namespace nitro {

// keyword_knob<Name>: known = false for a name that is no typed run keyword.
template <fixed_string Name>
struct keyword_knob {
  static constexpr bool known = false;
};

#define NITRO_DETAIL_KEYWORD_KNOB(KW)                                                                         \
  template <>                                                                                                 \
  struct keyword_knob<#KW> {                                                                                  \
    static constexpr bool known = true;                                                                       \
    using type = typename std::remove_cvref_t<decltype(kw::KW)>::value_type;                                  \
    template <class E>                                                                                        \
    static auto resolve(E const& e) { return ::nitro::resolve_##KW(e); }                                       \
    static auto make(std::optional<type> v) { return kw::KW = v; }                                            \
  };

// The table's `knob` rows (train/keywords.hpp): the typed keywords whose value a knob can hold.
#define NITRO_DETAIL_KNOB_ROW_knob(KW) NITRO_DETAIL_KEYWORD_KNOB(KW)
#define NITRO_DETAIL_KNOB_ROW_no_knob(KW)
#define NITRO_DETAIL_KNOB_OF_TYPED(KW_NAME, Type, Knob, ...) NITRO_DETAIL_KNOB_ROW_##Knob(KW_NAME)
#define NITRO_DETAIL_KNOB_OF_OTHER(...)
NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_KNOB_OF_TYPED, NITRO_DETAIL_KNOB_OF_OTHER, NITRO_DETAIL_KNOB_OF_OTHER, NITRO_DETAIL_KNOB_OF_OTHER)
#undef NITRO_DETAIL_KNOB_OF_TYPED
#undef NITRO_DETAIL_KNOB_OF_OTHER
#undef NITRO_DETAIL_KNOB_ROW_knob
#undef NITRO_DETAIL_KNOB_ROW_no_knob
#undef NITRO_DETAIL_KEYWORD_KNOB

}  // namespace nitro
