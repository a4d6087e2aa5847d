// A knob declared twice in knobs(): E-KNOB-001, naming the experiment and the knob.
// EXPECT: knob_declared_twice<Exp, nitro::knob_name<nitro::fixed_string<2>{"lr"}>
// EXPECT: E-KNOB-001
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  int layers = 4;
  static constexpr auto knobs() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::knobs(nitro::knob<"lr">("peak learning rate"), nitro::knob<"layers">(), nitro::knob<"lr">());
#else
    return nitro::knobs(nitro::knob<"lr">("peak learning rate"), nitro::knob<"layers">());
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr, layers);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
