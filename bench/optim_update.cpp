// optim_update — the optimizer's update cost per parameter: a 1M-parameter model as 50 arrays of
// 20 000 versus one array of 1 000 000. Each group is one contiguous span of the flat buffers and
// its rule runs once over the span, so the two layouts should cost the same.
//
//   ./optim_update [steps]      prints ns per parameter per step for SGD+momentum, AdamW, Lion,
//                               AdamW with a w0 anchor, and AdamW with global-norm clipping
#include <nitro/nitro.hpp>
#include <nitro/optim/program.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace {

template <std::size_t... I>
auto fifty(std::index_sequence<I...>) -> nitro::tree<nitro::entry<nitro::layer_name<I + 1>(), nitro::nn::param<100, 200>>...>;
using Fifty = decltype(fifty(std::make_index_sequence<50>{}));
using One = nitro::tree<nitro::entry<"weight", nitro::nn::param<1000, 1000>>>;
static_assert(nitro::nn::spec_numel<Fifty>() == 1000000 && nitro::nn::spec_numel<One>() == 1000000);

template <int Rule, bool Anchor = false>
struct Exp {
  double learning_rate() const { return 1e-3; }
  auto optimizer() const {
    if constexpr (Rule == 0) return nitro::optim::sgd({.momentum = 0.9});
    else if constexpr (Rule == 1) return nitro::optim::adamw();
    else return nitro::optim::lion({.lambda = 0.1});
  }
  auto decay_anchor() const {
    if constexpr (Anchor) return nitro::anchor::w0;
    else return nitro::anchor::zero;
  }
};

// ns per parameter per step: the median of `reps` timings of `steps` updates
template <class E, class Spec>
double measure(int steps, double clip = 0) {
  using P = nitro::optim::program<E, Spec>;
  typename P::store_type store;
  for (std::int64_t i = 0; i < P::store_type::size; ++i) {
    store.values()[i] = float(std::sin(double(i)));
    store.grads()[i] = float(std::cos(double(i))) * 1e-2f;
  }
  E e;
  P p(e, store, {}, {.gradient_clip_norm = clip, .horizon = steps * 8});
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      p.begin_step(e);
      p.update();
    }
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] / double(steps) / double(P::store_type::count);
}

template <class E>
void row(char const* name, int steps, double clip = 0) {
  const double a = measure<E, Fifty>(steps, clip), b = measure<E, One>(steps, clip);
  std::printf("%-28s %8.3f %8.3f %8.3f\n", name, a, b, a / b);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::printf("update cost, ns per parameter per step (1M parameters, %d steps, median of 7)\n", steps);
  std::printf("%-28s %8s %8s %8s\n", "rule", "50x20k", "1x1M", "ratio");
  row<Exp<0>>("sgd(momentum=0.9)", steps);
  row<Exp<1>>("adamw", steps);
  row<Exp<2>>("lion", steps);
  row<Exp<1, true>>("adamw, anchor w0", steps);
  row<Exp<1>>("adamw, clip 1.0 (global)", steps, 1.0);
  return 0;
}
