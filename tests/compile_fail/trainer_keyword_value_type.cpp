// A run keyword given a value of a type it does not take.
// EXPECT: nitro::keyword_value_has_wrong_type<nitro::keyword<
// EXPECT: ema
// EXPECT: E-KW-004
#include <nitro/train/keywords.hpp>

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::ema = "fast");
#else
  nitro::run_keywords kw(Exp{}, nitro::ema = 0.999);
#endif
  return kw.ema.value.enabled() ? 0 : 1;
}
