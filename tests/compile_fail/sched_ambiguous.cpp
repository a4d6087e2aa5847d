// A bare key that names a rule field (lambda, every group's decay) and a Device field (e.lambda).
// EXPECT: schedule_key_is_ambiguous<nitro::str<nitro::fixed_string<6>{"lambda"}>, nitro::qualified_forms<nitro::str<nitro::fixed_string<10>{"opt.lambda"}>, nitro::str<nitro::fixed_string<13>{"device.lambda"}> ?> ?>
// EXPECT: E-SCHED-001
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"lambda"> = 0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"device.lambda"> = 0.1, nitro::key<"opt.lambda"> = 0.01};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
