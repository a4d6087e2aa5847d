// A Host field is in neither namespace: the key matches nothing; both namespaces are listed.
// EXPECT: schedule_key_matches_nothing<nitro::str<'l', 'r'>, nitro::opt_fields<nitro::str<'e', 't', 'a'>, nitro::str<'l', 'a', 'm', 'b', 'd', 'a'>, nitro::str<'m', 'o', 'm', 'e', 'n', 't', 'u', 'm'>
// EXPECT: nitro::device_fields<nitro::str<'s', 'm', 'o', 'o', 't', 'h', 'i', 'n', 'g'>, nitro::str<'l', 'a', 'm', 'b', 'd', 'a'> ?> ?>
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
