// A device.* key naming no field of the experiment.
// EXPECT: schedule_key_names_no_device_field<nitro::str<'d', 'e', 'v', 'i', 'c', 'e', '.', 's', 'm', 'o', 'o', 't', 'h', 'i', 'n'>, nitro::device_fields<nitro::str<'s', 'm', 'o', 'o', 't', 'h', 'i', 'n', 'g'>, nitro::str<'l', 'a', 'm', 'b', 'd', 'a'> ?> ?>
// EXPECT: E-SCHED-005
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"device.smoothin"> = 0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"device.smoothing"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
