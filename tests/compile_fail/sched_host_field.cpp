// A Host field is in neither namespace: the key matches nothing; both namespaces are listed.
// EXPECT: schedule_key_matches_nothing<nitro::str<nitro::fixed_string<2>{"lr"}>, nitro::opt_fields<nitro::str<nitro::fixed_string<3>{"eta"}>, nitro::str<nitro::fixed_string<6>{"lambda"}>, nitro::str<nitro::fixed_string<12>{"sgd.momentum"}>
// EXPECT: nitro::device_fields<nitro::str<nitro::fixed_string<9>{"smoothing"}>, nitro::str<nitro::fixed_string<6>{"lambda"}> ?> ?>
// EXPECT: E-SCHED-002
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"lr"> = 0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"eta"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
