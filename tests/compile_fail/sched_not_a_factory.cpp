// A schedule is a number or a factory of the horizon.
// EXPECT: schedule_is_not_a_factory<nitro::str<nitro::fixed_string<3>{"eta"}>, nitro::returned<
// EXPECT: E-SCHED-007
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"eta"> = "fast"};
#else
  auto m = nitro::schedule_map{nitro::key<"eta"> = [](std::int64_t) { return [](std::int64_t t) { return 1.0 / double(t); }; }};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
