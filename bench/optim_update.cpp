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
#include <optional>
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

// One program over a 1M-parameter spec, ready to step.
template <class E, class Spec>
struct setup {
  using P = nitro::optim::program<E, Spec>;
  typename P::store_type store;
  E e;
  std::optional<P> p;
  setup(int steps, double clip) {
    for (std::int64_t i = 0; i < P::store_type::size; ++i) {
      store.values()[i] = float(std::sin(double(i)));
      store.grads()[i] = float(std::cos(double(i))) * 1e-2f;
    }
    p.emplace(e, store, nitro::schedule_map<>{}, nitro::optim::program_options{.gradient_clip_norm = clip, .horizon = steps * 64});
  }
  double time(int steps) {  // ns per parameter per step
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      p->begin_step(e);
      p->update();
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / double(steps) /
           double(P::store_type::count);
  }
};

// The two layouts timed alternately (so a busy machine slows both alike); medians of 15.
template <class E>
void row(char const* name, int steps, double clip = 0) {
  setup<E, Fifty> fifty_arrays(steps, clip);
  setup<E, One> one_array(steps, clip);
  std::vector<double> a, b;
  for (int rep = 0; rep < 15; ++rep) {
    a.push_back(fifty_arrays.time(steps));
    b.push_back(one_array.time(steps));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double ma = a[a.size() / 2], mb = b[b.size() / 2];
  std::printf("%-28s %8.3f %8.3f %8.3f\n", name, ma, mb, ma / mb);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::printf("update cost, ns per parameter per step (1M parameters, %d steps, median of 15)\n", steps);
  std::printf("%-28s %8s %8s %8s\n", "rule", "50x20k", "1x1M", "ratio");
  row<Exp<0>>("sgd(momentum=0.9)", steps);
  row<Exp<1>>("adamw", steps);
  row<Exp<2>>("lion", steps);
  row<Exp<1, true>>("adamw, anchor w0", steps);
  row<Exp<1>>("adamw, clip 1.0 (global)", steps, 1.0);
  return 0;
}
