// A sweep axis over a knob knobs() does not declare: E-KNOB-003 (seed is declared in every experiment).
// EXPECT: sweep_sets_undeclared_knob<Exp, nitro::sweep_name<nitro::fixed_string<4>{"grid"}>, nitro::knob_name<nitro::fixed_string<2>{"wd"}>
// EXPECT: E-KNOB-003
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  float wd = 0.01f;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"lr">()); }
  static constexpr auto sweeps() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::sweeps(nitro::sweep<"grid">(nitro::axis<"lr">(0.001, 0.002), nitro::axis<"wd">(0.0, 0.1)));
#else
    return nitro::sweeps(nitro::sweep<"grid">(nitro::axis<"lr">(0.001, 0.002), nitro::axis<"seed">(1, 2)));
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr, wd);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
