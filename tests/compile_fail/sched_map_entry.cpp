// schedule_map takes key = schedule entries.
// EXPECT: schedules_takes_key_value_pairs<double>
// EXPECT: E-SCHED-008
// EXPECT-ONLY-CODED (the optimizer program reported each use of the bad entry after it)
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{0.1};
#else
  auto m = nitro::schedule_map{nitro::key<"eta"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
