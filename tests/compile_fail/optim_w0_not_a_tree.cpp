// The w0 construction fact takes a tree of tensors shaped like ps.
// EXPECT: w0_must_be_a_tree_of_tensors<std::(__cxx11::)?basic_string<char
// EXPECT: E-OPT-019
#include "common.hpp"

#include <string>

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::labelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, cf::FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, cf::LossIn const& in) const { return nitro::nn::mse(y, in.label); }
  auto decay_anchor() const { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro other(Exp{});
#ifdef NITRO_COMPILE_FAIL
  nitro::Nitro h(Exp{}, nitro::w0 = std::string("start"));
#else
  nitro::Nitro h(Exp{}, nitro::w0 = other.params());
#endif
  return int(h.step());
}
