// A path-bound key naming a field the group's rule does not have (head runs Adam: no momentum).
// EXPECT: schedule_key_names_no_rule_field<nitro::str<nitro::fixed_string<17>{"opt.head.momentum"}>, nitro::opt_fields<nitro::str<nitro::fixed_string<3>{"eta"}>, nitro::str<nitro::fixed_string<6>{"lambda"}>, nitro::str<nitro::fixed_string<10>{"adam.beta1"}>
// EXPECT: E-SCHED-004
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"opt.head.momentum"> = 0.9};
#else
  auto m = nitro::schedule_map{nitro::key<"opt.encoder.momentum"> = 0.9};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
