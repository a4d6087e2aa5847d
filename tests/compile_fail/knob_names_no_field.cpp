// A knob that names neither a field nor a run keyword: E-KNOB-002.
// EXPECT: knob_names_no_field<Exp, nitro::knob_name<nitro::fixed_string<3>{"lrr"}>
// EXPECT: E-KNOB-002
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  float lr = 1e-3f;
  static constexpr auto knobs() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::knobs(nitro::knob<"lrr">("peak learning rate"), nitro::knob<"max_epochs">());
#else
    return nitro::knobs(nitro::knob<"lr">("peak learning rate"), nitro::knob<"max_epochs">());  // a run keyword: legal
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
