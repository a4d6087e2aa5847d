// learning_rate(group) and lambda(group) return numbers.
// EXPECT: rate_hook_must_return_a_number<nitro::hook::lambda, nitro::str<nitro::fixed_string<7>{"default"}>, nitro::returned<
// EXPECT: E-OPT-006
#include "optim_common.hpp"

#include <string>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  std::string lambda(nitro::default_group) const { return "0.01"; }
#else
  double lambda(nitro::default_group) const { return 0.01; }
#endif
};

int main() { return cfo::program_of<Exp>(); }
