// nitro::main<...> given programs of two experiments, which cannot share one command line: E-KNOB-009.
// EXPECT: programs_of_different_experiments<A<8>, B>
// EXPECT: E-KNOB-009
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/catalog.hpp>

template <int W = 8>
struct A {
  nitro::GraphConst<int, W> width;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"width">()); }
};
NITRO_EXPERIMENT(A, width);
struct B {
  float lr = 1e-3f;
};
NITRO_EXPERIMENT(B, lr);

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto c = nitro::make_catalog<A<8>, B>();
#else
  auto c = nitro::make_catalog<A<8>, A<16>>();
#endif
  return c.programs.size() == 2 ? 0 : 1;
}
