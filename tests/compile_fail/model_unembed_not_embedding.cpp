// Weight tying names the member whose weight the head reads backwards: a member that is not an
// embedding does not compile, and the error names the struct, the member and its type.
// EXPECT: model_struct<cf::Net>, nitro::nn::member_named<nitro::fixed_string<4>{"body"}>, nitro::nn::member_type<nitro::nn::dense_layer<4, 4
// EXPECT: E-LAYER-025
#include "common.hpp"

namespace cf {
struct Net {
  nitro::nn::embedding_layer<7, 4> tok;
  nitro::nn::dense_layer<4, 4, nitro::nn::gelu_t> body;
  template <class N, class X> auto forward(N& net, X const& tokens) const {
    auto h = nitro::nn::call<"body">(net, nitro::nn::call<"tok">(net, tokens));
#ifdef NITRO_COMPILE_FAIL
    return nitro::nn::unembed<"body">(net, h);
#else
    return nitro::nn::unembed<"tok">(net, h);
#endif
  }
};
NITRO_MODEL(Net, tok, body);
}  // namespace cf

int main() {
  auto m = nitro::nn::model(cf::Net{});
  nitro::nn::layer_params<decltype(m)> ps;
  nitro::nn::layer_state<decltype(m)> st;
  (void)m(nitro::Tensor::from({1, 6, 0}, {3, 1}), ps, st);
}
