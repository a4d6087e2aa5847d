// param_group must return a group tag: the leaf and what came back are named.
// EXPECT: param_group_must_return_a_group<nitro::str<nitro::fixed_string<14>{"layer_1.weight"}>, nitro::returned<(const )?char ?\*>
// EXPECT: E-OPT-002
#include "optim_common.hpp"

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  auto param_group(auto) const { return "encoder"; }
#else
  auto param_group(auto) const { return nitro::group<"encoder">{}; }
#endif
};

int main() { return cfo::program_of<Exp>(); }
