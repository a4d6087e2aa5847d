// A device.* key naming a Host field.
// EXPECT: host_field_is_not_on_the_device<&cfo::Fields<8>::lr>
// EXPECT: E-MARK-003
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"device.lr"> = 0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"device.smoothing"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
