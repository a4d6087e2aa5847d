// Two keys for one slot: eta and opt.eta are the same rule field.
// EXPECT: schedule_keys_bind_the_same_slot<nitro::str<nitro::fixed_string<3>{"eta"}>, nitro::str<nitro::fixed_string<7>{"opt.eta"}> ?>
// EXPECT: E-SCHED-006
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"eta"> = 0.1, nitro::key<"opt.eta"> = 0.2};
#else
  auto m = nitro::schedule_map{nitro::key<"eta"> = 0.1, nitro::key<"opt.head.eta"> = 0.2};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
