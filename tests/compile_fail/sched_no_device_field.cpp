// A device.* key naming no field of the experiment.
// EXPECT: schedule_key_names_no_device_field<nitro::str<nitro::fixed_string<15>{"device.smoothin"}>, nitro::device_fields<nitro::str<nitro::fixed_string<9>{"smoothing"}>, nitro::str<nitro::fixed_string<6>{"lambda"}> ?> ?>
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
