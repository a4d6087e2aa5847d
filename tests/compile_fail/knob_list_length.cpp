// A sweep gives a std::array<float, 2> knob a list of three numbers: E-KNOB-007 at compile time,
// naming the sweep, the knob and the lengths its values span (2 to 3), not a truncated run.
// EXPECT: knob_value_does_not_fit<Exp, nitro::sweep_name<nitro::fixed_string<5>{"betas"}>, nitro::knob_name<nitro::fixed_string<5>{"betas"}>, nitro::given<nitro::list_constant<double, 2, 3>
// EXPECT: E-KNOB-007
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

#include <array>

struct Exp {
  std::array<float, 2> betas{0.9f, 0.999f};
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"betas">()); }
  static constexpr auto sweeps() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::sweeps(nitro::sweep<"betas">(nitro::axis<"betas">(std::array{0.9, 0.99}, std::array{0.9, 0.99, 0.999})));
#else
    return nitro::sweeps(nitro::sweep<"betas">(nitro::axis<"betas">(std::array{0.9, 0.99}, std::array{0.8, 0.999})));
#endif
  }
};
NITRO_EXPERIMENT(Exp, betas);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
