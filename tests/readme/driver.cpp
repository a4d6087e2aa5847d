// Runs the README's trainer (readme_trainer.cpp, cut from README.md by CMake) for a few steps: the
// block compiles as written, binds to Fashion-MNIST, trains and evaluates with the stock metrics.
#define main readme_trainer_main  // the README's own main trains five epochs; it is compiled, not run here
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"  // main may leave out its return; readme_trainer_main may not
#include "readme_trainer.cpp"
#pragma GCC diagnostic pop
#undef main

#include <cstdio>

int main() {
  nitro::Nitro h(FashionMLP<32>{}, nitro::max_steps = 30, nitro::logger = nitro::no_loggers);
  h.train();
  auto test = h.evaluate("test");
  auto const& cm = test.tensor("confusion");
  double total = 0, trace = 0;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) total += cm(i, j), trace += i == j ? cm(i, j) : 0.0;
  const bool agree = total > 0 && std::abs(trace / total - test.at("acc")) < 1e-9;
  std::printf("readme trainer: %lld steps, test acc %.4f, confusion %lldx%lld of %.0f%s\n", static_cast<long long>(h.step()), test.at("acc"),
              static_cast<long long>(cm.shape()[0]), static_cast<long long>(cm.shape()[1]), total,
              agree ? "" : " (its trace does not give acc)");
  return agree && h.step() == 30 ? 0 : 1;
}
