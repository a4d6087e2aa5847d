// no_decay (and no_perturb, adaptive_perturb) take (keypath, tensor) and return bool.
// EXPECT: leaf_hook_must_return_bool<nitro::hook::no_decay, nitro::str<nitro::fixed_string<1[24]>{"layer_[12][.](weight|bias)"}>
// EXPECT: E-OPT-005
#include "optim_common.hpp"

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  bool no_decay(nitro::Tensor const& x) const { return x.rank() < 2; }  // the keypath is missing
#else
  bool no_decay(auto, nitro::Tensor const& x) const { return x.rank() < 2; }
#endif
};

int main() { return cfo::program_of<Exp>(); }
