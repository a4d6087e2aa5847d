// A hook declares a batch field with a type the batch's field does not convert to: the binding
// names the hook, both fields and both types when the handle is declared, before any step is
// compiled. (batch_field_wrong_type_body.cpp: the same when the hook's body fails on the field too.)
// EXPECT: E-BIND-005
// EXPECT: nitro::hook::forward, nitro::hook_field<&FwdIdx::idx>, nitro::batch_field<&cf::Batch::idx>, nitro::declared_as<nitro::basic_tensor<float> >, nitro::batch_gives<nitro::basic_tensor<long int> >
#include "common.hpp"

#ifdef NITRO_COMPILE_FAIL
struct FwdIdx { BOOST_HANA_DEFINE_STRUCT(FwdIdx, (nitro::Tensor, img), (nitro::Tensor, idx)); };
#else
struct FwdIdx { BOOST_HANA_DEFINE_STRUCT(FwdIdx, (nitro::Tensor, img), (nitro::Index, idx)); };
#endif

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::unlabelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIdx const& in) const { return m(in.img, ps, st); }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});  // declaring the handle binds the hooks
  (void)h;
}
