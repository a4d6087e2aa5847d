// A sweep whose base variant is not declared: E-KNOB-004, naming the sweep and the variant.
// EXPECT: sweep_base_variant_undeclared<Exp, nitro::sweep_name<nitro::fixed_string<4>{"deep"}>, nitro::variant_name<nitro::fixed_string<4>{"smal"}>
// EXPECT: E-KNOB-004
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  int layers = 4;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"lr">(), nitro::knob<"layers">()); }
  static constexpr auto variants() { return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2))); }
  static constexpr auto sweeps() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::sweeps(nitro::sweep<"deep">(nitro::base<"smal">, nitro::axis<"lr">(0.002, 0.004)));
#else
    return nitro::sweeps(nitro::sweep<"deep">(nitro::base<"small">, nitro::axis<"lr">(0.002, 0.004)));
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr, layers);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
