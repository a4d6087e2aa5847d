// A field named after the generic run keyword `logger` that holds no logger.
// EXPECT: nitro::keyword_field_has_wrong_type<nitro::keyword<
// EXPECT: logger
// EXPECT: E-KW-002
#include <nitro/train/keywords.hpp>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  int logger = 3;
#else
  nitro::no_loggers_t logger = nitro::no_loggers;
#endif
};

int main() {
  nitro::run_keywords kw(Exp{});
  return nitro::to_logger_set(kw.logger.value).empty() ? 0 : 1;
}
