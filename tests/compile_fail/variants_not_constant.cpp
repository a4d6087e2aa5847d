// The note's late variant in C++: variants() that is not a compile-time constant would exist only
// after the experiment does, too late for the selection. E-KNOB-006.
// EXPECT: variants_not_constant<Exp>
// EXPECT: E-KNOB-006
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  int layers = 4;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"layers">()); }
#ifdef NITRO_COMPILE_FAIL
  auto variants() const { return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(layers / 2))); }
#else
  static constexpr auto variants() { return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2))); }
#endif
};
NITRO_EXPERIMENT(Exp, layers);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
