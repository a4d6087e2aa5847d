// A field named after the run keyword `ema`, of a type that does not convert to ema_options.
// EXPECT: nitro::keyword_field_has_wrong_type<nitro::keyword<
// EXPECT: ema
// EXPECT: E-KW-002
#include <nitro/train/keywords.hpp>

#include <string>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  std::string ema = "fast";
#else
  double ema = 0.999;
#endif
};

int main() {
  nitro::run_keywords kw(Exp{});
  return kw.ema.value.enabled() ? 0 : 1;
}
