// resume continues one checkpoint: an Average of several is refused when the handle reads the keyword.
// EXPECT: resume_takes_one_checkpoint<nitro::run_checkpoint<nitro::Average> ?>
// EXPECT: E-CKPT-101
#include <nitro/record/weights_ref.hpp>

int main() {
#ifdef NITRO_COMPILE_FAIL
  auto r = nitro::to_resume_ref(nitro::latest >> nitro::Average(nitro::Last(3)));
#else
  auto r = nitro::to_resume_ref(nitro::latest >> nitro::Last(3));
#endif
  (void)r;
}
