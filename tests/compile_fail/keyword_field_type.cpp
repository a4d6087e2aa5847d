// A field named after a run keyword, of a type that does not convert to the keyword's.
// EXPECT: nitro::keyword_field_has_wrong_type<nitro::keyword<
// EXPECT: max_epochs
// EXPECT: E-KW-002
#include "common.hpp"

#include <string>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  std::string max_epochs = "five";
#else
  int max_epochs = 5;
#endif
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, max_epochs, batch_size);

int main() {
  nitro::Nitro h(Exp{});
  (void)h;
}
