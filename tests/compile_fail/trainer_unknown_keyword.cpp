// A keyword object whose name is no run keyword (a misspelling made by hand).
// EXPECT: nitro::unknown_run_keyword<nitro::keyword<
// EXPECT: max_epoch
// EXPECT: E-KW-003
#include <nitro/train/keywords.hpp>

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::keyword<"max_epoch", int>{} = 3);
#else
  nitro::run_keywords kw(Exp{}, nitro::keyword<"max_epochs", int>{} = 3);
#endif
  return kw.max_epochs.value == 3 ? 0 : 1;
}
