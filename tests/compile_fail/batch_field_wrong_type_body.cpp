// A hook declares a batch field with a type the batch's field does not convert to, and its body
// (a template in the model, so compiled to learn its return type) uses the field as the batch
// types it: the binding's error names the hook, both fields and both types first, ahead of the
// body's own error, because the hook's input is checked against the batch while the hook is
// looked up, before its body is compiled.
// EXPECT: E-BIND-005
// EXPECT: nitro::hook::forward, nitro::hook_field<&FwdIdx::idx>, nitro::batch_field<&cf::Batch::idx>, nitro::declared_as<nitro::basic_tensor<float> >, nitro::batch_gives<nitro::basic_tensor<long int> >
#include "common.hpp"

#ifdef NITRO_COMPILE_FAIL
struct FwdIdx { BOOST_HANA_DEFINE_STRUCT(FwdIdx, (nitro::Tensor, img), (nitro::Tensor, idx)); };
#else
struct FwdIdx { BOOST_HANA_DEFINE_STRUCT(FwdIdx, (nitro::Tensor, img), (nitro::Index, idx)); };
#endif

// the body's use of the field: it takes class indices, as the batch gives them (a call that depends
// on the model, so it is checked when the hook is instantiated, as a layer's call would be)
template <class Model>
std::int64_t first_class(Model const&, nitro::Index const& idx) { return idx.numel() ? idx.data()[0] : 0; }

struct Exp {
  std::int64_t batch_size = 4;
  auto build_data() const { return cf::unlabelled(); }
  auto build_model() const { return nitro::nn::dense<4, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIdx const& in) const {
    (void)first_class(m, in.idx);
    return m(in.img, ps, st);
  }
};
NITRO_EXPERIMENT(Exp, batch_size);

int main() {
  nitro::Nitro h(Exp{});  // declaring the handle binds the hooks
  (void)h;
}
