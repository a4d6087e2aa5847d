// Two sweeps of one name: E-KNOB-008.
// EXPECT: sweep_declared_twice<Exp, nitro::sweep_name<nitro::fixed_string<5>{"seeds"}>
// EXPECT: E-KNOB-008
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"lr">()); }
  static constexpr auto sweeps() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2)), nitro::sweep<"seeds">(nitro::axis<"seed">(3, 4)));
#else
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3, 4)));
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
