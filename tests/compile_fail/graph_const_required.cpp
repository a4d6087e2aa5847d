// A value the compiler must know, asked of a run-time field.
// EXPECT: nitro::graph_const_required<&Exp::width>
// EXPECT: E-MARK-001
#include "common.hpp"

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  int width = 128;  // a Host field
#else
  nitro::GraphConst<int, 128> width;
#endif
  auto build_model() const { return nitro::nn::dense<784, nitro::graph_const_v<&Exp::width>>(); }
};
NITRO_EXPERIMENT(Exp, width);

int main() { (void)Exp{}.build_model(); }
