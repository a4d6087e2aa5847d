// A variant value of another kind than its knob (a string for a number): E-KNOB-007.
// EXPECT: knob_value_does_not_fit<Exp, nitro::variant_name<nitro::fixed_string<4>{"fast"}>, nitro::knob_name<nitro::fixed_string<2>{"lr"}>, nitro::given<std::.*string_view
// EXPECT: E-KNOB-007
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/declarations.hpp>

#include <string>

struct Exp {
  float lr = 1e-3f;
  std::string optimizer = "adamw";
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"lr">(), nitro::knob<"optimizer">()); }
  static constexpr auto variants() {
#ifdef NITRO_COMPILE_FAIL
    return nitro::variants(nitro::variant<"fast">(nitro::set<"lr">("0.01")));
#else
    return nitro::variants(nitro::variant<"fast">(nitro::set<"lr">(0.01), nitro::set<"optimizer">("sgd")));
#endif
  }
};
NITRO_EXPERIMENT(Exp, lr, optimizer);

static_assert(nitro::declarations<Exp>::ok);
int main() {}
