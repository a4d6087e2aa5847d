// The schedules accessor (or keyword) must give a nitro::schedule_map{...}.
// EXPECT: schedules_must_be_a_schedule_map<Exp::Curves>
// EXPECT: E-SCHED-009
#include "common.hpp"

struct Exp {
  std::int64_t batch_size = 4;
  struct Curves { double eta = 1e-3; };
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
#ifdef NITRO_COMPILE_FAIL
  auto schedules() const { return Curves{}; }
#else
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = 1e-3}; }
#endif
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});
  return int(h.step());
}
