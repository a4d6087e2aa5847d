// weights given twice: once as itself and once as its deprecated spelling, checkpoint.
// EXPECT: nitro::run_keyword_given_twice<nitro::keyword<
// EXPECT: weights
// EXPECT: checkpoint
// EXPECT: E-KW-005
#include <nitro/train/keywords.hpp>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::weights = "a.safetensors", nitro::kw::checkpoint = "b.safetensors");
#else
  nitro::run_keywords kw(Exp{}, nitro::kw::checkpoint = "b.safetensors");
#endif
  return kw.checkpoint_spelling ? 0 : 1;
}
