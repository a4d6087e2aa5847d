// optimizer() must return a rule.
// EXPECT: optimizer_must_return_a_rule<nitro::hook::optimizer, nitro::str<nitro::fixed_string<7>{"default"}>, nitro::returned<double> ?>
// EXPECT: E-OPT-003
#include "optim_common.hpp"

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  double optimizer() const { return 1e-3; }
#else
  auto optimizer() const { return nitro::optim::adam(); }
#endif
};

int main() { return cfo::program_of<Exp>(); }
