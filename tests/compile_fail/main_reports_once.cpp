// nitro::main<A, B, C> over three widths of one experiment whose forward hook is misspelt: the
// mistake is every program's, and it is told once (the other programs are not compiled then).
// EXPECT: required_hook_missing<nitro::hook::forward, Exp<8> ?>
// EXPECT: E-BIND-007
// EXPECT-ONCE: E-BIND-007
#include "common.hpp"
#include <nitro/main.hpp>

template <int W>
struct Exp {
  nitro::GraphConst<int, W> width;
  std::int64_t batch_size = 4;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"width">()); }
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<4, W>(), nitro::nn::dense<W, 2>()); }
#ifdef NITRO_COMPILE_FAIL
  auto forwrd(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
#else
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
#endif
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
};
NITRO_EXPERIMENT(Exp, width, batch_size);

int main(int argc, char** argv) { return nitro::main<Exp<8>, Exp<16>, Exp<32>>(argc, argv); }
