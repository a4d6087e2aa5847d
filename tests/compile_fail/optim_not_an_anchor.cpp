// decay_anchor must return an anchor.
// EXPECT: decay_anchor_must_return_an_anchor<nitro::hook::decay_anchor, nitro::str<nitro::fixed_string<4>{"head"}>, nitro::returned<int> ?>
// EXPECT: E-OPT-004
#include "optim_common.hpp"

struct Exp : cfo::TwoGroups {
#ifdef NITRO_COMPILE_FAIL
  int decay_anchor(nitro::group<"head">) const { return 0; }
#else
  auto decay_anchor(nitro::group<"head">) const { return nitro::anchor::w0; }
#endif
};

int main() { return cfo::program_of<Exp>(); }
