// An accessor named after the run keyword `early_stop` whose result does not convert to early_stopping.
// EXPECT: nitro::keyword_accessor_has_wrong_type<nitro::keyword<
// EXPECT: early_stop
// EXPECT: E-KW-002
#include <nitro/train/keywords.hpp>

#include <string>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  std::string early_stop() const { return "soon"; }
#else
  int early_stop() const { return 3; }
#endif
};

int main() {
  nitro::run_keywords kw(Exp{});
  return kw.early_stop.value.patience;
}
