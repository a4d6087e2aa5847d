// A member of a model struct that is not a layer does not compile: the error names the struct,
// the member and its type.
// EXPECT: model_struct<cf::Net>, nitro::nn::member_named<nitro::fixed_string<5>{"width"}>, nitro::nn::member_type<int>
// EXPECT: E-LAYER-023
#include "common.hpp"

namespace cf {
struct Net {
  nitro::nn::dense_layer<8, 8, nitro::nn::relu_t> body;
#ifdef NITRO_COMPILE_FAIL
  int width = 8;
#else
  nitro::nn::dense_layer<8, 8> width;
#endif
  template <class N, class X> auto forward(N& net, X const& x) const { return nitro::nn::call<"body">(net, x); }
};
NITRO_MODEL(Net, body, width);
}  // namespace cf

int main() {
  auto m = nitro::nn::model(cf::Net{});
  (void)m;
}
