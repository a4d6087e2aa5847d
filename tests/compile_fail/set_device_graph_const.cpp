// A GraphConst given where a run-time value is required: its value is the program.
// EXPECT: nitro::graph_const_is_not_writable<&Exp<8>::width>
// EXPECT: E-MARK-002
#include "common.hpp"

template <int W = 8>
struct Exp {
  nitro::GraphConst<int, W> width;
  nitro::Device<float> smoothing{0.0f};
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, width, smoothing, batch_size);

int main() {
  nitro::Nitro h(Exp<8>{});
#ifdef NITRO_COMPILE_FAIL
  h.set_device<&Exp<8>::width>(16);
#else
  h.set_device<&Exp<8>::smoothing>(0.1f);
#endif
}
