// A key naming two fields of one group's rule: chain(sgd, sgd) has two momentum fields, and a bare
// `momentum` would drive both. The error shows the paths that name each one.
// EXPECT: schedule_key_names_several_rule_fields<nitro::str<nitro::fixed_string<8>{"momentum"}>, nitro::qualified_forms<nitro::str<nitro::fixed_string<20>{"opt.chain.1.momentum"}>, nitro::str<nitro::fixed_string<20>{"opt.chain.2.momentum"}> ?> ?>
// EXPECT: E-SCHED-012
#include "optim_common.hpp"

namespace cfo {
struct TwoMomenta {
  auto optimizer() const { return nitro::optim::chain(nitro::optim::sgd({.momentum = 0.9}), nitro::optim::sgd({.momentum = 0.5})); }
};
}  // namespace cfo

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"momentum"> = 0.9};
#else
  auto m = nitro::schedule_map{nitro::key<"chain.2.momentum"> = 0.9};
#endif
  return cfo::program_of<cfo::TwoMomenta>(m);
}
