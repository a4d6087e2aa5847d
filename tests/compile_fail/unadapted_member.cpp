// A data member left out of NITRO_EXPERIMENT would vanish from knobs, manifests and checkpoints:
// the error names the experiment, the member's position and its type.
// EXPECT: experiment_member_not_adapted<Exp<128>, 3, float>|declared_member<3, float>
// EXPECT: E-REFL-001
#include "common.hpp"

template <int Width = 128>
struct Exp {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  float weight_decay = 0.1f;
  std::int64_t batch_size = 4;
};
#ifdef NITRO_COMPILE_FAIL
NITRO_EXPERIMENT(Exp, width, smoothing, batch_size);  // weight_decay forgotten
#else
NITRO_EXPERIMENT(Exp, width, smoothing, weight_decay, batch_size);
#endif

static_assert(nitro::experiment_traits<Exp<128>>::complete);
int main() {}
