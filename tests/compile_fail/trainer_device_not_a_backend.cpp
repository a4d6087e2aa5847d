// The device construction fact given something that is no backend (tensor/backend.hpp's concept).
// EXPECT: nitro::keyword_value_has_wrong_type<nitro::keyword<
// EXPECT: device
// EXPECT: E-KW-004
#include <nitro/train/keywords.hpp>

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::device = 42);
#else
  nitro::run_keywords kw(Exp{}, nitro::device = nitro::cpu_backend{});
#endif
  return kw.device.source == nitro::keyword_source::keyword ? 0 : 1;
}
