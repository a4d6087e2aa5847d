// An enum knob whose values no NITRO_KNOB_ENUM names could be neither printed nor parsed:
// E-KNOB-002 naming the knob and its type, with the macro as the fix.
// EXPECT: knob_type_not_supported<Exp, nitro::knob_name<nitro::fixed_string<9>{"optimizer"}>, nitro::given<opt_kind>
// EXPECT: E-KNOB-002.*NITRO_KNOB_ENUM
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

enum class opt_kind { adamw, sgd };
#ifndef NITRO_COMPILE_FAIL
NITRO_KNOB_ENUM(opt_kind, adamw, sgd)
#endif

struct Exp {
  opt_kind optimizer = opt_kind::adamw;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"optimizer">()); }
};
NITRO_EXPERIMENT(Exp, optimizer);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
