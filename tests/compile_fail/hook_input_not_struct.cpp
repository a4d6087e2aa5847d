// A hook's last parameter is not a Hana struct of batch fields.
// EXPECT: nitro::hook::forward
// EXPECT: nitro::hook_input_type<PlainIn>
// EXPECT: E-BIND-002
#include "common.hpp"

#ifdef NITRO_COMPILE_FAIL
struct PlainIn { nitro::Tensor img; };  // forgot BOOST_HANA_DEFINE_STRUCT
#else
struct PlainIn { BOOST_HANA_DEFINE_STRUCT(PlainIn, (nitro::Tensor, img)); };
#endif

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, PlainIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});
  h.train(false);
}
