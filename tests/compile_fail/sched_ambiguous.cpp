// A bare key that names a rule field (lambda, every group's decay) and a Device field (e.lambda).
// EXPECT: schedule_key_is_ambiguous<nitro::str<'l', 'a', 'm', 'b', 'd', 'a'>, nitro::qualified_forms<nitro::str<'o', 'p', 't', '.', 'l', 'a', 'm', 'b', 'd', 'a'>, nitro::str<'d', 'e', 'v', 'i', 'c', 'e', '.', 'l', 'a', 'm', 'b', 'd', 'a'> ?> ?>
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
