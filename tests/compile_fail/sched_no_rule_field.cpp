// A path-bound key naming a field the group's rule does not have (head runs Adam: no momentum).
// EXPECT: schedule_key_names_no_rule_field<nitro::str<'o', 'p', 't', '.', 'h', 'e', 'a', 'd', '.', 'm', 'o', 'm', 'e', 'n', 't', 'u', 'm'>, nitro::opt_fields<nitro::str<'e', 't', 'a'>, nitro::str<'l', 'a', 'm', 'b', 'd', 'a'>, nitro::str<'b', 'e', 't', 'a', '1'>
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
