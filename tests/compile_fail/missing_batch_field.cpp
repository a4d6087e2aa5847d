// A hook declares a batch field the batch lacks: the error names the hook, the missing member and
// every field the batch has.
// EXPECT: nitro::hook::loss
// EXPECT: nitro::missing<&cf::LossIn::label>
// EXPECT: nitro::batch_has<&cf::Batch::img, &cf::Batch::idx>
// EXPECT: E-BIND-001
#include "common.hpp"

struct Exp {
  std::int64_t batch_size = 4;
#ifdef NITRO_COMPILE_FAIL
  auto build_data() const { return cf::unlabelled(); }   // no label field
#else
  auto build_data() const { return cf::labelled(); }
#endif
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});
  h.train(false);
}
