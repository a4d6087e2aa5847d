// nitro/nn/gradcheck.hpp — gradients checked against central finite differences.
//
//   auto r = nitro::nn::gradcheck([&] { return nitro::sum(f(x, w)); }, {&x, &w});
//   CHECK(r.ok);   // r.worst names the input and element that disagreed most
//
// f runs once under a tape (the analytic gradient) and twice per element with no tape (the
// numeric one). Use double tensors: float32 differences are too noisy to judge a backward pass.
#pragma once

#include "nitro/tensor/arena.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <algorithm>         // max
#include <cmath>             // abs
#include <initializer_list>  // inputs
#include <string>            // report
#include <vector>            // gradients

namespace nitro::nn {

struct gradcheck_result {
  bool ok = true;
  double max_abs_error = 0, max_rel_error = 0;
  std::string worst;  // "input 1, element 7: analytic 0.25, numeric 0.2500001"
};

template <class F>
gradcheck_result gradcheck(F&& f, std::initializer_list<basic_tensor<double>*> inputs, double eps = 1e-6, double atol = 1e-7,
                           double rtol = 1e-5, bool training = true, std::uint64_t seed = 42) {
  gradcheck_result r;
  std::vector<std::vector<double>> analytic;
  auto run = [&](bool with_tape) {
    arena mem;
    tape tp(mem);
    step_context ctx{&mem, with_tape ? &tp : nullptr, training, seed, 0};
    context_scope scope(ctx);
    if (with_tape) {
      analytic.clear();
      for (auto* in : inputs) {
        analytic.emplace_back(static_cast<std::size_t>(in->numel()), 0.0);
        in->set_var(tp.leaf(analytic.back().data(), sizeof(double) * static_cast<std::size_t>(in->numel())));
      }
    } else {
      for (auto* in : inputs) in->set_var(-1);
    }
    basic_tensor<double> y = f();
    double v = y.item();
    if (with_tape) tp.backward<double>(y.var(), 1.0);
    for (auto* in : inputs) in->set_var(-1);
    return v;
  };
  run(true);
  std::size_t which = 0;
  for (auto* in : inputs) {
    for (std::int64_t i = 0; i < in->numel(); ++i) {
      double keep = (*in)[i];
      (*in)[i] = keep + eps;
      double up = run(false);
      (*in)[i] = keep - eps;
      double down = run(false);
      (*in)[i] = keep;
      double numeric = (up - down) / (2 * eps);
      double a = analytic[which][static_cast<std::size_t>(i)];
      double err = std::abs(a - numeric);
      double rel = err / std::max(std::abs(numeric), 1e-12);
      if (err > r.max_abs_error) {
        r.max_abs_error = err;
        r.worst = "input " + std::to_string(which) + ", element " + std::to_string(i) + ": analytic " + std::to_string(a) +
                  ", numeric " + std::to_string(numeric);
      }
      r.max_rel_error = std::max(r.max_rel_error, err > atol ? rel : 0.0);
      if (err > atol + rtol * std::abs(numeric)) r.ok = false;
    }
    ++which;
  }
  return r;
}

}  // namespace nitro::nn
