// The same run keyword given twice.
// EXPECT: nitro::run_keyword_given_twice<nitro::keyword<
// EXPECT: seed
// EXPECT: E-KW-005
#include <nitro/train/keywords.hpp>

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::seed = 1, nitro::max_epochs = 3, nitro::seed = 2);
#else
  nitro::run_keywords kw(Exp{}, nitro::seed = 1, nitro::max_epochs = 3);
#endif
  return kw.max_epochs.value == 3 ? 0 : 1;
}
