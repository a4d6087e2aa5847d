// A path-bound key naming a group param_group does not produce.
// EXPECT: schedule_key_names_unknown_group<nitro::str<nitro::fixed_string<14>{"opt.encodr.eta"}>, nitro::param_group_produces<nitro::str<nitro::fixed_string<7>{"encoder"}>, nitro::str<nitro::fixed_string<4>{"head"}> ?> ?>
// EXPECT: E-SCHED-003
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"opt.encodr.eta"> = 0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"opt.encoder.eta"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
