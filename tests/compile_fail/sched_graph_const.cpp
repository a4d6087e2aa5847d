// A GraphConst cannot be scheduled: its value is the program.
// EXPECT: graph_const_is_not_writable<&cfo::Fields<8>::width>
// EXPECT: E-MARK-002
#include "optim_common.hpp"

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto m = nitro::schedule_map{nitro::key<"width"> = 16};
#else
  auto m = nitro::schedule_map{nitro::key<"smoothing"> = 0.1};
#endif
  return cfo::program_of<cfo::Fields<8>>(m);
}
