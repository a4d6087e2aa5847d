// forward's outputs go to loss exactly as returned: a loss that cannot take them is named with
// what forward returns.
// EXPECT: nitro::hook::forward
// EXPECT: nitro::returns<Outputs>
// EXPECT: nitro::hook::loss
// EXPECT: nitro::expects<nitro::basic_tensor<float> >|nitro::expects<nitro::basic_tensor<float>>
// EXPECT: E-BIND-003
#include "common.hpp"

struct Outputs { BOOST_HANA_DEFINE_STRUCT(Outputs, (nitro::Tensor, logits), (nitro::Tensor, embedding)); };

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const {
    auto [y, st2] = m(in.img, ps, st);
    return std::pair{Outputs{y, in.img}, st2};
  }
#ifdef NITRO_COMPILE_FAIL
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
#else
  auto loss(Outputs const& o, cf::LossIn const& in) const { return nitro::nn::mse(o.logits, in.label); }
#endif
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});
  h.train(false);
}
