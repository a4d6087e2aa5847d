// Two variants of one name: E-KNOB-006 (variants do not compose; the second would shadow the first).
// EXPECT: variant_declared_twice<Exp, nitro::variant_name<nitro::fixed_string<5>{"smoke"}>
// EXPECT: E-KNOB-006
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

struct Exp {
  int layers = 4;
  int seq = 1024;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"layers">(), nitro::knob<"seq">()); }
  static constexpr auto variants() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::variants(nitro::variant<"smoke">(nitro::set<"layers">(2)), nitro::variant<"smoke">(nitro::set<"seq">(64)));
#else
    return nitro::variants(nitro::variant<"smoke">(nitro::set<"layers">(2), nitro::set<"seq">(64)));
#endif
  }
};
NITRO_EXPERIMENT(Exp, layers, seq);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
