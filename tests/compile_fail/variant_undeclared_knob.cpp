// A variant that sets a knob knobs() does not declare: E-KNOB-003, naming the variant and the knob.
// EXPECT: variant_sets_undeclared_knob<Exp, nitro::variant_name<nitro::fixed_string<5>{"small"}>, nitro::knob_name<nitro::fixed_string<4>{"lyrs"}>
// EXPECT: E-KNOB-003
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  int layers = 4;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"lr">(), nitro::knob<"layers">()); }
  static constexpr auto variants() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::variants(nitro::variant<"small">(nitro::set<"lyrs">(2), nitro::set<"lr">(0.002)));
#else
    return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"lr">(0.002), nitro::set<"seed">(7)));
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr, layers);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
