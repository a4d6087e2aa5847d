// weights takes a path or run >> checkpoint; a number names nothing.
// EXPECT: not_a_weights_reference<int>
// EXPECT: E-CKPT-102
#include <nitro/record/weights_ref.hpp>

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto r = nitro::to_weights_ref(42);  // meant nitro::latest >> nitro::Best(42)?
#else
  auto r = nitro::to_weights_ref(nitro::latest >> nitro::Best(42));
#endif
  (void)r;
}
