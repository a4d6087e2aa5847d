// A per-group hook written for a group param_group does not produce: the misspelt group and the
// groups there are, both spelled out.
// EXPECT: per_group_hook_names_unknown_group<nitro::hook::learning_rate, nitro::str<nitro::fixed_string<6>{"encodr"}>, nitro::param_group_produces<nitro::str<nitro::fixed_string<7>{"encoder"}>, nitro::str<nitro::fixed_string<4>{"head"}> ?> ?>
// EXPECT: E-OPT-001
#include "optim_common.hpp"

struct Exp : cfo::TwoGroups {
  double learning_rate() const { return 1e-3; }
#ifdef NITRO_COMPILE_FAIL
  double learning_rate(nitro::group<"encodr">) const { return 1e-4; }
#else
  double learning_rate(nitro::group<"encoder">) const { return 1e-4; }
#endif
};

int main() { return cfo::program_of<Exp>(); }
