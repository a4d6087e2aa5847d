// Something that is not a run keyword, passed to the handle.
// EXPECT: nitro::not_a_run_keyword<int, 2>
// EXPECT: E-KW-001
// EXPECT-ONLY-CODED (it printed about 80 follow-on errors from the keyword lookups)
#include "common.hpp"

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::Nitro h(Exp{}, 60);  // meant nitro::max_epochs = 60
#else
  nitro::Nitro h(Exp{}, nitro::max_epochs = 60);
#endif
  (void)h;
}
