// Schedules come from the keyword or an accessor, never from a data member.
// EXPECT: nitro::schedules_come_from_an_accessor<&Exp::schedules>
// EXPECT: E-KW-006
#include <nitro/train/keywords.hpp>

struct Sched {
  double eta = 1e-3;
};
struct Exp {
#ifdef NITRO_COMPILE_FAIL
  Sched schedules;
#else
  Sched schedules() const { return {}; }
#endif
};

int main() {
  nitro::run_keywords kw(Exp{});
  return kw.schedules.value.eta > 0 ? 0 : 1;
}
