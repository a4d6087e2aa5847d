// forward calling a member the model struct does not have does not compile: the error names the
// struct, the name called and the members there are.
// EXPECT: model_struct<cf::Net>, nitro::nn::member_named<nitro::fixed_string<5>{"heads"}>
// EXPECT: members_are<nitro::fixed_string<4>{"body"}, nitro::fixed_string<4>{"head"}>
// EXPECT: E-LAYER-024
#include "common.hpp"

namespace cf {
struct Net {
  nitro::nn::dense_layer<8, 8, nitro::nn::relu_t> body;
  nitro::nn::dense_layer<8, 2> head;
  template <class N, class X> auto forward(N& net, X const& x) const {
#ifdef NITRO_COMPILE_FAIL
    return nitro::nn::call<"heads">(net, nitro::nn::call<"body">(net, x));
#else
    return nitro::nn::call<"head">(net, nitro::nn::call<"body">(net, x));
#endif
  }
};
NITRO_MODEL(Net, body, head);
}  // namespace cf

int main() {
  auto m = nitro::nn::model(cf::Net{});
  nitro::nn::layer_params<decltype(m)> ps;
  nitro::nn::layer_state<decltype(m)> st;
  (void)m(nitro::Tensor::owned({8, 1}), ps, st);
}
