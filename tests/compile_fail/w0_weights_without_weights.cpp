// w0 = nitro::weights without a weights keyword: the anchor would be weights that are never loaded.
// EXPECT: w0_names_weights_not_given<
// EXPECT: E-CKPT-103
#include <nitro/record/weights_ref.hpp>
#include <nitro/core/fixed_string.hpp>

struct weights_keyword { static constexpr nitro::fixed_string name{"weights"}; };  // the shape of nitro::weights

int main() {
#ifdef NITRO_COMPILE_FAIL
  static_assert(nitro::check_w0_weights<weights_keyword, false>());  // Nitro(e, nitro::w0 = nitro::weights)
#else
  static_assert(nitro::check_w0_weights<weights_keyword, true>());   // Nitro(e, nitro::weights = "...", nitro::w0 = nitro::weights)
#endif
}
