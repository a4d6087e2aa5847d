// optim/: the optimizer program — every rule against PyTorch, schedules against torch's schedulers,
// groups and their flat buffers, rates and ratios, decay toward zero / w0 / given values, global
// clipping, accumulation equal to a bigger batch, SAM and ASAM against a reference, schedule keys
// reaching rule fields and Device fields, exact resume from exported state, and the coded errors.
#include <nitro/nitro.hpp>
#include <nitro/optim/program.hpp>
#include <nitro/tensor/cpu/backend.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace optim_test {

using json = nlohmann::json;
using Spec = nitro::tree<nitro::entry<"a", nitro::nn::param<4, 3>>, nitro::entry<"b", nitro::nn::param<6>>>;

json load(char const* name) {
  std::ifstream f(std::string(NITRO_TEST_DATA_DIR) + "/optim/" + name);
  REQUIRE(f.good());
  return json::parse(f);
}

// An experiment that is only an optimizer: a base rate, a rule, decay on every leaf (as torch does).
template <class MakeRule>
struct RuleExp {
  double rate = 1e-3;
  MakeRule make;
  double learning_rate() const { return rate; }
  auto optimizer() const { return make(); }
  bool no_decay(auto, nitro::Tensor const&) const { return false; }
};
template <class MakeRule>
RuleExp(double, MakeRule) -> RuleExp<MakeRule>;

template <class Store>
void put(Store& st, float* base, json const& leaves) {
  for (std::size_t l = 0; l < 2; ++l) {
    auto const& li = Store::leaves[l];
    auto v = leaves[l].get<std::vector<float>>();
    REQUIRE(std::int64_t(v.size()) == li.numel);
    std::memcpy(base + li.offset, v.data(), v.size() * sizeof(float));
  }
}
template <class Store>
double max_error(Store& st, json const& leaves) {
  double worst = 0;
  for (std::size_t l = 0; l < 2; ++l) {
    auto const& li = Store::leaves[l];
    auto v = leaves[l].get<std::vector<double>>();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double got = st.values()[li.offset + std::int64_t(i)];
      worst = std::max(worst, std::abs(got - v[i]) / (1e-3 + std::abs(v[i])));
    }
  }
  return worst;
}

// Runs a fixture case through a program and returns the worst relative error over every step.
template <class E, class Map = nitro::schedule_map<>>
double replay(json const& c, E e, Map map = {}, nitro::optim::program_options o = {}) {
  using P = nitro::optim::program<E, Spec, Map>;
  typename P::store_type store;
  put(store, store.values(), c["init"]);
  o.horizon = c["steps"].get<std::int64_t>();
  P p(e, store, map, o);
  double worst = 0;
  for (std::size_t s = 0; s < c["grads"].size(); ++s) {
    p.begin_step(e);
    if (!c["lrs"].empty()) CHECK(p.field("default", "eta") == doctest::Approx(c["lrs"][s].get<double>()).epsilon(1e-9));
    if (!c["beta1s"].empty()) CHECK(p.field("default", "beta1") == doctest::Approx(c["beta1s"][s].get<double>()).epsilon(1e-9));
    store.zero_grads();
    put(store, store.grads(), c["grads"][s]);
    p.update();
    worst = std::max(worst, max_error(store, c["params"][s]));
  }
  CHECK(p.steps() == std::int64_t(c["grads"].size()));
  return worst;
}

json const& fixture_case(json const& all, std::string const& name) {
  for (auto const& c : all["cases"])
    if (c["name"] == name) return c;
  FAIL("no fixture case " << name);
  return all;
}

}  // namespace optim_test

using namespace optim_test;
namespace optim = nitro::optim;
namespace sched = nitro::sched;

TEST_CASE("every rule matches PyTorch step by step (fixtures from tests/data/optim/make_fixtures.py)") {
  json all = load("rules.json");
  constexpr double tol = 2e-5;  // float32, eight steps
  CHECK(replay(fixture_case(all, "sgd"), RuleExp{0.1, [] { return optim::sgd(); }}) < tol);
  CHECK(replay(fixture_case(all, "sgd_momentum_dampening"), RuleExp{0.05, [] { return optim::sgd({.momentum = 0.9, .dampening = 0.1}); }}) < tol);
  // momentum 0 is plain SGD whatever the dampening, as in PyTorch (it scaled the step by 1 - dampening)
  CHECK(replay(fixture_case(all, "sgd_dampening_no_momentum"), RuleExp{0.05, [] { return optim::sgd({.dampening = 0.5}); }}) < tol);
  CHECK(replay(fixture_case(all, "sgd_nesterov_weight_decay"),
               RuleExp{0.05, [] { return optim::chain(optim::decayed_weights(0.01), optim::sgd({.momentum = 0.9, .nesterov = true})); }}) < tol);
  CHECK(replay(fixture_case(all, "adam"), RuleExp{1e-2, [] { return optim::adam(); }}) < tol);
  CHECK(replay(fixture_case(all, "adam_weight_decay"),
               RuleExp{1e-2, [] { return optim::chain(optim::decayed_weights(0.1), optim::adam({.beta1 = 0.8, .beta2 = 0.99})); }}) < tol);
  CHECK(replay(fixture_case(all, "adamw"), RuleExp{1e-2, [] { return optim::adamw({.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .lambda = 0.1}); }}) < tol);
  CHECK(replay(fixture_case(all, "lion"), RuleExp{1e-3, [] { return optim::lion({.beta1 = 0.9, .beta2 = 0.99, .lambda = 0.5}); }}) < tol);
  CHECK(replay(fixture_case(all, "clip_adamw"), RuleExp{1e-2, [] { return optim::adamw({.lambda = 0.01}); }}, {}, {.gradient_clip_norm = 0.5}) < tol);
  // OneCycleLR with its default momentum cycling, which for AdamW drives beta1
  CHECK(replay(fixture_case(all, "adamw_one_cycle"), RuleExp{1e-2, [] { return optim::adamw({.lambda = 0.01}); }},
               nitro::schedule_map{nitro::key<"eta"> = sched::one_cycle(0.05), nitro::key<"beta1"> = sched::one_cycle_momentum()}) < tol);
}

namespace optim_test {
// A user's rule written as one element function (no vectorised block): the program runs it element by
// element, and the CUDA kernel runs the same function (tensor/cuda/optimizer_math.hpp).
struct element_adam {
  using fields = nitro::optim::field_names<"beta1", "beta2", "eps">;
  using paths = nitro::optim::field_names<"element_adam.beta1", "element_adam.beta2", "element_adam.eps">;
  using states = nitro::optim::field_names<"m", "v">;
  static constexpr std::array<nitro::optim::domain, 3> domains{nitro::optim::domain::unit_open, nitro::optim::domain::unit_open,
                                                               nitro::optim::domain::nonnegative};
  std::array<double, 3> values{0.9, 0.999, 1e-8};
  double default_lambda = 0;
  using consts = nitro::rule_math::adam_consts;
  consts prepare(double const* f, std::int64_t t) const { return nitro::rule_math::adam_consts_at(f[0], f[1], f[2], t); }
  template <bool Decay, bool Anchor>
  static void element(consts const& k, float& u, float, float, float* s) noexcept {
    nitro::rule_math::adam_direction(u, s[0], s[1], k);
  }
  std::string describe(double const*) const { return "element_adam"; }
};
static_assert(nitro::optim::rule<element_adam>);
}  // namespace optim_test

TEST_CASE("a rule that is one element function runs through the program, alone and in a chain") {
  json all = load("rules.json");
  constexpr double tol = 2e-5;
  CHECK(replay(fixture_case(all, "adam"), RuleExp{1e-2, [] { return element_adam{}; }}) < tol);
  CHECK(replay(fixture_case(all, "adam_weight_decay"), RuleExp{1e-2, [] {
                 element_adam a;
                 a.values = {0.8, 0.99, 1e-8};
                 return optim::chain(optim::decayed_weights(0.1), a);
               }}) < tol);
  // the element path is really taken and can fail: the wrong beta2 is seen
  CHECK(replay(fixture_case(all, "adam"), RuleExp{1e-2, [] {
                 element_adam a;
                 a.values = {0.9, 0.5, 1e-8};
                 return a;
               }}) > 1e-4);
}

TEST_CASE("a rule that is wrong fails the reference check (the check can fail)") {
  json all = load("rules.json");
  CHECK(replay(fixture_case(all, "adamw"), RuleExp{1e-2, [] { return optim::adamw({.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .lambda = 0.2}); }}) > 1e-4);
  CHECK(replay(fixture_case(all, "sgd_momentum_dampening"), RuleExp{0.05, [] { return optim::sgd({.momentum = 0.9}); }}) > 1e-4);
}

TEST_CASE("schedules: the library against torch's schedulers, step t being torch's index t - 1") {
  json all = load("schedules.json")["schedules"];
  auto check_curve = [](auto factory, json const& s, char const* column = "lr") {
    auto curve = factory(s["total"].get<std::int64_t>());
    auto want = s[column].get<std::vector<double>>();
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(curve(std::int64_t(i) + 1) - want[i]) / std::abs(want[i]));
    return worst;
  };
  CHECK(check_curve(sched::one_cycle(0.01), all["one_cycle_default"]) < 1e-12);
  CHECK(check_curve(sched::one_cycle_momentum(), all["one_cycle_default"], "momentum") < 1e-12);
  sched::one_cycle_options three{.pct_start = 0.25, .div_factor = 10, .final_div_factor = 100, .three_phase = true,
                                 .anneal = sched::anneal::linear, .base_momentum = 0.8, .max_momentum = 0.9};
  CHECK(check_curve(sched::one_cycle(0.3, three), all["one_cycle_three_phase_linear"]) < 1e-12);
  CHECK(check_curve(sched::one_cycle_momentum(three), all["one_cycle_three_phase_linear"], "momentum") < 1e-12);
  CHECK(check_curve(sched::linear(0.025, 0.1, {.steps = 10}), all["linear"]) < 1e-12);
  CHECK(check_curve(sched::cosine(0.1, {.min = 0.001}), all["cosine"]) < 1e-9);
  CHECK(check_curve(sched::step(0.1, 7, 0.5), all["step"]) < 1e-12);
  CHECK(check_curve(sched::exponential(0.1, 0.9), all["exponential"]) < 1e-12);
  CHECK(check_curve(sched::warmup_cosine(0.1, 5, {.min = 1e-4, .start_factor = 0.1}), all["warmup_cosine"]) < 1e-12);
  CHECK(check_curve(sched::one_cycle(0.02), all["one_cycle_default"]) > 0.1);  // the check can fail
  // past the horizon a library curve holds its last value
  auto oc = sched::one_cycle(0.01)(100);
  CHECK(oc(100) == oc(150));
}

namespace optim_test {
struct Plain {
  double learning_rate() const { return 0.1; }
  auto optimizer() const { return optim::sgd(); }
};
}  // namespace optim_test

TEST_CASE("schedules are factories of the horizon: called once with the total, then per step from 1; a number is a constant") {
  std::vector<std::int64_t> totals, steps;
  auto counting = [&](std::int64_t total) {
    totals.push_back(total);
    return [&steps](std::int64_t t) { steps.push_back(t); return 0.5 / double(t); };
  };
  auto map = nitro::schedule_map{nitro::key<"eta"> = counting, nitro::key<"lambda"> = 0.25};
  using P = optim::program<Plain, Spec, decltype(map)>;
  P::store_type store;
  Plain e;
  P p(e, store, map, {.horizon = 4});
  REQUIRE(totals == std::vector<std::int64_t>{4});
  CHECK(steps == std::vector<std::int64_t>{1, 2, 3, 4, 1});  // setup checks the whole horizon, then shows step 1
  steps.clear();
  for (int s = 0; s < 3; ++s) {
    p.begin_step(e);
    CHECK(p.field("default", "eta") == doctest::Approx(0.5 / (s + 1)));
    CHECK(p.field("default", "lambda") == 0.25);
    p.update();
  }
  CHECK(steps == std::vector<std::int64_t>{1, 2, 3});
  CHECK(totals.size() == 1);
}

namespace optim_test {
// Two groups by keypath: layer_1.* is the encoder, everything else the head.
struct Grouped {
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate() const { return 1e-2; }
  double learning_rate(nitro::group<"encoder">) const { return 1e-3; }  // ratio 0.1
  double lambda(nitro::group<"encoder">) const { return 0.5; }
  double lambda(nitro::group<"head">) const { return 0.0; }
  auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::w0; }
  auto optimizer(nitro::group<"encoder">) const { return optim::sgd(); }
  auto optimizer(nitro::group<"head">) const { return optim::adam(); }
};
using Net = nitro::nn::chain_layer<nitro::nn::dense_layer<6, 5>, nitro::nn::dense_layer<5, 5>, nitro::nn::dense_layer<5, 2>>;
using NetSpec = Net::param_spec;
}  // namespace optim_test

TEST_CASE("groups: each a contiguous span of the flat buffers, in order of first leaf; one chain application per group per step") {
  using P = optim::program<Grouped, NetSpec>;
  using S = P::store_type;
  static_assert(P::group_count == 2);
  static_assert(nitro::group_layout<Grouped, NetSpec>::group_names[0] == "encoder");
  static_assert(nitro::group_layout<Grouped, NetSpec>::group_names[1] == "head");
  static_assert(S::groups[0].offset == 0 && S::groups[1].offset == S::groups[0].size);
  static_assert(S::groups[0].count == 6 * 5 + 5 && S::groups[1].count == 5 * 5 + 5 + 5 * 2 + 2);
  static_assert(S::groups[0].leaves == 2 && S::groups[1].leaves == 4);
  // within a group, matrices first (so the default no_decay makes at most two runs)
  static_assert(S::leaves[2].keypath == "layer_2.weight" && S::leaves[4].keypath == "layer_3.weight");
  static_assert(S::leaves[4].offset < S::leaves[3].offset);
  for (auto const& li : S::leaves) {
    auto const& g = S::groups[std::size_t(li.group)];
    CHECK(li.offset >= g.offset);
    CHECK(li.offset + li.numel <= g.offset + g.size);
  }
  S store;
  Grouped e;
  P p(e, store, {}, {.horizon = 10});
  for (int s = 0; s < 3; ++s) {
    p.begin_step(e);
    p.update();
  }
  CHECK(p.chain_applications() == 3 * 2);
  auto info = p.group_infos();
  REQUIRE(info.size() == 2);
  CHECK(info[0].name == "encoder");
  CHECK(info[0].ratio == doctest::Approx(0.1));
  CHECK(info[0].anchor == "w0");
  CHECK(info[0].decayed_leaves == 1);  // the bias is 1-D: no decay by default
  CHECK(info[0].rule == "sgd(momentum=0, dampening=0)");
  CHECK(info[1].rule == "adam(beta1=0.9, beta2=0.999, eps=1e-08)");
  std::string d = p.describe();
  CHECK(d.find("2 groups") != std::string::npos);
  CHECK(d.find("encoder") != std::string::npos);
  CHECK(d.find("schedules: none") != std::string::npos);
  auto names = std::vector<std::string>{};
  for (auto const& s : p.state_tensors()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"optim.step", "optim.encoder.momentum_buffer", "optim.encoder.anchor", "optim.head.m", "optim.head.v"});
}

namespace optim_test {
struct FieldRate {
  double learning_rate = 0.02;  // a field serves as the base, as the accessor would
};
struct LrField {
  float lr = 0.03f;
};
struct NoRate {};
}  // namespace optim_test

TEST_CASE("rates: the base is learning_rate(), else a field learning_rate, else a field lr, else 1e-3") {
  auto eta_of = []<class E>(E e) {
    using P = optim::program<E, Spec>;
    typename P::store_type store;
    P p(e, store, {}, {.horizon = 1});
    return p.field("default", "eta");
  };
  CHECK(eta_of(FieldRate{}) == doctest::Approx(0.02));
  CHECK(eta_of(LrField{}) == doctest::Approx(0.03));
  CHECK(eta_of(Plain{}) == doctest::Approx(0.1));
  CHECK(eta_of(NoRate{}) == doctest::Approx(1e-3));
}

TEST_CASE("rates: learning_rate(group) is the group's rate; its ratio scales eta schedules, bare or path-bound") {
  using Map = decltype(nitro::schedule_map{nitro::key<"eta"> = 0.5, nitro::key<"opt.head.eta"> = 0.2});
  {
    using P = optim::program<Grouped, NetSpec>;
    P::store_type store;
    Grouped e;
    P p(e, store, {}, {.horizon = 1});
    CHECK(p.field("encoder", "eta") == doctest::Approx(1e-3));  // no schedule: the accessor
    CHECK(p.field("head", "eta") == doctest::Approx(1e-2));     // no accessor: the base
  }
  {
    using P = optim::program<Grouped, NetSpec, Map>;
    P::store_type store;
    Grouped e;
    P p(e, store, Map{nitro::key<"eta"> = 0.5, nitro::key<"opt.head.eta"> = 0.2}, {.horizon = 1});
    p.begin_step(e);
    CHECK(p.field("encoder", "eta") == doctest::Approx(0.05));  // bare key x ratio 0.1
    CHECK(p.field("head", "eta") == doctest::Approx(0.2));      // path key overrides the bare one
    std::string d = p.describe();
    CHECK(d.find("eta = 0.5  ->  opt: encoder.eta (x0.1)") != std::string::npos);
    CHECK(d.find("opt.head.eta = 0.2  ->  opt, path-bound: head.eta (x1)") != std::string::npos);
    CHECK_THROWS_WITH_AS(p.field("encodr", "eta"), doctest::Contains("E-OPT-018"), nitro::error);
    CHECK_THROWS_WITH_AS(p.field("head", "momentum"), doctest::Contains("E-OPT-018"), nitro::error);
  }
}

namespace optim_test {
// Two groups whose rules wrap and chain others: a rule field is named by its path in the rule.
struct Wrapped {
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate() const { return 1e-2; }
  auto optimizer(nitro::group<"encoder">) const { return optim::sam(optim::adamw({.beta1 = 0.8})); }
  auto optimizer(nitro::group<"head">) const { return optim::chain(optim::sgd({.momentum = 0.5}), optim::sgd({.momentum = 0.7})); }
};
}  // namespace optim_test

TEST_CASE("rule fields by path: sam.adamw.beta1, chain.2.momentum; a key or field() names a path or a tail of it") {
  using nitro::optim::rule_paths_t;
  static_assert(rule_paths_t<decltype(optim::sam(optim::adamw()))>::views[0] == "sam.adamw.beta1");
  static_assert(rule_paths_t<decltype(optim::sam(optim::adamw()))>::views[3] == "sam.rho");
  static_assert(rule_paths_t<decltype(optim::asam(optim::adam()))>::views[4] == "asam.adaptive_eta");
  static_assert(rule_paths_t<decltype(optim::chain(optim::decayed_weights(1e-4), optim::sgd()))>::views[1] == "chain.2.momentum");
  static_assert(rule_paths_t<decltype(optim::sam(optim::chain(optim::sgd(), optim::lion())))>::views[2] == "sam.chain.2.beta1");
  static_assert(nitro::optim::names_path("sam.adamw.beta1", "beta1") && nitro::optim::names_path("sam.adamw.beta1", "adamw.beta1") &&
                !nitro::optim::names_path("sam.adamw.beta1", "ta1") && !nitro::optim::names_path("sam.adamw.beta1", "sam.beta1"));

  using Map = decltype(nitro::schedule_map{nitro::key<"adamw.beta1"> = 0.6, nitro::key<"opt.head.chain.2.momentum"> = 0.3, nitro::key<"opt.1.momentum"> = 0.2});
  using P = optim::program<Wrapped, NetSpec, Map>;
  P::store_type store;
  Wrapped e;
  P p(e, store, Map{nitro::key<"adamw.beta1"> = 0.6, nitro::key<"opt.head.chain.2.momentum"> = 0.3, nitro::key<"opt.1.momentum"> = 0.2}, {.horizon = 1});
  p.begin_step(e);
  CHECK(p.field("encoder", "beta1") == doctest::Approx(0.6));
  CHECK(p.field("encoder", "sam.adamw.beta1") == doctest::Approx(0.6));
  CHECK(p.field("encoder", "rho") == doctest::Approx(0.05));
  CHECK(p.field("head", "chain.1.momentum") == doctest::Approx(0.2));  // each key drives its own rule of the chain
  CHECK(p.field("head", "2.momentum") == doctest::Approx(0.3));
  // one name for two fields of a group is refused, naming both paths
  CHECK_THROWS_WITH_AS(p.field("head", "momentum"), doctest::Contains("'momentum' names 2 fields: chain.1.momentum, chain.2.momentum"), nitro::error);
  CHECK_THROWS_WITH_AS(p.field("encoder", "sam.beta1"), doctest::Contains("E-OPT-018"), nitro::error);
  const std::string d = p.describe();
  CHECK(d.find("adamw.beta1 = 0.6  ->  opt: encoder.sam.adamw.beta1\n") != std::string::npos);
  CHECK(d.find("opt.head.chain.2.momentum = 0.3  ->  opt, path-bound: head.chain.2.momentum\n") != std::string::npos);
  const auto l = p.landings();
  REQUIRE(l.size() == 3);
  CHECK((l[0].key == "adamw.beta1" && l[0].group == "encoder" && l[0].field == "sam.adamw.beta1"));
  CHECK((l[1].group == "head" && l[1].field == "chain.2.momentum"));
  CHECK((l[2].key == "opt.1.momentum" && l[2].field == "chain.1.momentum"));
}

namespace optim_test {
template <class Anchor>
struct Decaying {
  Anchor anchor;
  double learning_rate() const { return 0.5; }
  double lambda(nitro::default_group) const { return 0.2; }
  auto decay_anchor(nitro::default_group) const { return anchor; }
  auto optimizer() const { return optim::sgd(); }
};
template <class A> Decaying(A) -> Decaying<A>;
}  // namespace optim_test

TEST_CASE("decoupled decay toward zero, w0 or given values; 1-D leaves are not decayed by default") {
  auto one_step = [](auto e, float before, float after_w0) {
    using E = decltype(e);
    using P = optim::program<E, Spec>;
    typename P::store_type store;
    for (auto const& li : P::store_type::leaves) for (std::int64_t i = 0; i < li.numel; ++i) store.values()[li.offset + i] = before;
    P p(e, store, {}, {.horizon = 2});
    if (after_w0 != before) for (auto const& li : P::store_type::leaves) for (std::int64_t i = 0; i < li.numel; ++i) store.values()[li.offset + i] = after_w0;
    p.begin_step(e);
    store.zero_grads();
    p.update();
    return std::pair{store.values()[P::store_type::leaves[0].offset], store.values()[P::store_type::leaves[1].offset]};
  };
  // zero anchor: w <- w - eta*lambda*w = 2 - 0.5*0.2*2
  auto [a0, b0] = one_step(Decaying{nitro::anchor::zero}, 2.0f, 2.0f);
  CHECK(a0 == doctest::Approx(1.8));
  CHECK(b0 == 2.0f);  // the 1-D leaf b keeps its value
  // w0 anchor: starts at 2 (w0), moved to 3 before the step: 3 - 0.1*(3 - 2)
  auto [a1, b1] = one_step(Decaying{nitro::anchor::w0}, 2.0f, 3.0f);
  CHECK(a1 == doctest::Approx(2.9));
  CHECK(b1 == 3.0f);
  // given values: a tree of tensors shaped like ps, looked up by keypath
  nitro::nn::params_t<Spec> target;
  nitro::get<"a">(target) = nitro::Tensor::full({4, 3}, 1.0f);
  nitro::get<"b">(target) = nitro::Tensor::full({6}, 1.0f);
  auto [a2, b2] = one_step(Decaying{nitro::anchor::values(target)}, 2.0f, 2.0f);
  CHECK(a2 == doctest::Approx(1.9));
  CHECK(b2 == 2.0f);
  // or a callable keypath -> tensor
  auto lookup = [](std::string_view kp) { return kp == "a" ? nitro::Tensor::full({4, 3}, -1.0f) : nitro::Tensor{}; };
  auto [a3, b3] = one_step(Decaying{nitro::anchor::values(lookup)}, 2.0f, 2.0f);
  CHECK(a3 == doctest::Approx(1.7));
  // a decayed leaf the anchor lacks, or one of the wrong shape, is an error at setup
  auto none = [](std::string_view) { return nitro::Tensor{}; };
  CHECK_THROWS_WITH_AS(one_step(Decaying{nitro::anchor::values(none)}, 2.0f, 2.0f), doctest::Contains("E-OPT-013"), nitro::error);
  auto wrong = [](std::string_view) { return nitro::Tensor::full({3, 4}, 0.0f); };
  CHECK_THROWS_WITH_AS(one_step(Decaying{nitro::anchor::values(wrong)}, 2.0f, 2.0f), doctest::Contains("E-OPT-013"), nitro::error);
}

namespace optim_test {
struct DecayAll {
  double learning_rate() const { return 0.5; }
  double lambda(nitro::default_group) const { return 0.2; }
  auto optimizer() const { return optim::sgd(); }
  bool no_decay(auto kp, nitro::Tensor const&) const { return kp.view() == "a"; }  // per leaf, by keypath
};
}  // namespace optim_test

TEST_CASE("no_decay(keypath, x) decides per leaf") {
  using P = optim::program<DecayAll, Spec>;
  P::store_type store;
  for (std::int64_t i = 0; i < P::store_type::size; ++i) store.values()[i] = 2.0f;
  DecayAll e;
  P p(e, store, {}, {.horizon = 1});
  p.begin_step(e);
  p.update();
  CHECK(store.values()[P::store_type::leaves[0].offset] == 2.0f);
  CHECK(store.values()[P::store_type::leaves[1].offset] == doctest::Approx(1.8));
  CHECK(p.group_infos()[0].decayed_leaves == 1);
}

namespace optim_test {
struct OneGroupSgd {
  double learning_rate() const { return 0.1; }
  auto optimizer() const { return optim::sgd({.momentum = 0.5}); }
};
struct TwoGroupSgd {
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"x">{};
    else return nitro::group<"y">{};
  }
  double learning_rate() const { return 0.1; }
  auto optimizer() const { return optim::sgd({.momentum = 0.5}); }
};
}  // namespace optim_test

TEST_CASE("gradient_clip_norm is one global norm over every group, applied before any group") {
  auto run = []<class E>(E e, double clip) {
    using P = optim::program<E, NetSpec>;
    typename P::store_type store;
    P p(e, store, {}, {.gradient_clip_norm = clip, .horizon = 3});
    std::vector<float> out;
    for (int s = 0; s < 3; ++s) {
      p.begin_step(e);
      for (std::size_t l = 0; l < P::store_type::leaves.size(); ++l) {
        auto const& li = P::store_type::leaves[l];
        for (std::int64_t i = 0; i < li.numel; ++i) store.grads()[li.offset + i] = float(std::sin(double(100 * l + std::size_t(i)) + s)) * float(l % 3 + 1);
      }
      p.update();
      if (clip > 0) CHECK(p.last_gradient_norm() > clip);
    }
    for (auto const& li : P::store_type::leaves) out.insert(out.end(), store.values() + li.offset, store.values() + li.offset + li.numel);
    return out;
  };
  auto one = run(OneGroupSgd{}, 0.7);
  auto two = run(TwoGroupSgd{}, 0.7);
  REQUIRE(one.size() == two.size());
  double worst = 0;
  for (std::size_t i = 0; i < one.size(); ++i) worst = std::max(worst, double(std::abs(one[i] - two[i])));
  CHECK(worst < 1e-6);
  // and it did clip: without the threshold the weights move further
  auto free = run(OneGroupSgd{}, 0.0);
  double moved_clip = 0, moved_free = 0;
  for (std::size_t i = 0; i < one.size(); ++i) { moved_clip += std::abs(one[i]); moved_free += std::abs(free[i]); }
  CHECK(moved_free > 2 * moved_clip);
}

// ---- on the backend's threads -------------------------------------------------------------------------
namespace optim_test {
// Cuts a count into 3 shares and runs them on the calling thread, last first, counting them: an
// order and a cut no pool uses, so bits that survive it do not depend on which thread took which piece.
struct reversed_ops final : nitro::cpu::ops {
  int calls = 0;
  std::int64_t pieces = 0;
  using nitro::device_ops::for_each_share;
  void for_each_share(std::int64_t count, nitro::range_task task) override {
    ++calls;
    pieces += count;
    for (int s = 2; s >= 0; --s) task(count * s / 3, count * (s + 1) / 3);
  }
};
struct pool_ops final : nitro::cpu::ops {  // a pool of 3 threads, whatever the machine has
  nitro::cpu::thread_pool pool{3};
  using nitro::device_ops::for_each_share;
  void for_each_share(std::int64_t count, nitro::range_task task) override { pool.for_each_share(count, [&](std::int64_t b, std::int64_t e) { task(b, e); }); }
};
using BigSpec = nitro::tree<nitro::entry<"w", nitro::nn::param<400, 200>>, nitro::entry<"b", nitro::nn::param<200>>>;
struct BigAdamw {
  double learning_rate() const { return 1e-2; }
  auto optimizer() const { return nitro::optim::adamw({.lambda = 0.1}); }
};
}  // namespace optim_test

TEST_CASE("the update runs in fixed pieces on the backend's threads: the same bits in any order, on any number of threads") {
  // 80000 weights: 20 pieces of the rule's pass and 2 of the clipping norm's; every run clips.
  auto run = [](nitro::device_ops* ops) {
    using P = optim::program<BigAdamw, BigSpec>;
    typename P::store_type store;
    for (std::int64_t i = 0; i < P::store_type::size; ++i) store.values()[i] = float(std::cos(double(i)));
    BigAdamw e;
    P p(e, store, {}, {.gradient_clip_norm = 5.0, .horizon = 4});
    nitro::step_context ctx;
    ctx.ops = ops;
    nitro::context_scope scope(ctx);
    for (int s = 0; s < 4; ++s) {
      p.begin_step(e);
      for (std::int64_t i = 0; i < P::store_type::size; ++i) store.grads()[i] = float(std::sin(double(i) * 0.37 + s));
      p.update();
      CHECK(p.last_gradient_norm() > 5.0);
    }
    std::vector<float> out(store.values(), store.values() + P::store_type::size);
    for (auto const& entry : p.state_tensors())
      if (auto const* t = std::get_if<nitro::Tensor>(&entry.value)) out.insert(out.end(), t->data(), t->data() + t->numel());
    return out;
  };
  const std::vector<float> own = run(nullptr);  // the process's pool
  reversed_ops reversed;
  pool_ops three;
  const std::vector<float> backwards = run(&reversed), on_three = run(&three);
  CHECK(reversed.calls == 4 * 2);  // per step: the norm and the weights' run (the bias is one piece, run inline)
  CHECK(reversed.pieces == 4 * (2 + 20));
  REQUIRE(own.size() == backwards.size());
  REQUIRE(own.size() == on_three.size());
  CHECK(std::memcmp(own.data(), backwards.data(), own.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(own.data(), on_three.data(), own.size() * sizeof(float)) == 0);
}

// ---- through the handle ------------------------------------------------------------------------------
namespace optim_test {
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

// The experiments below differ in one hook each; this is what they share.
#define NITRO_TEST_MLP_BODY                                                                                      \
  nitro::Device<float> smoothing{0.0f};                                                                          \
  std::int64_t batch_size = 32;                                                                                  \
  int max_epochs = 1;                                                                                            \
  int train_limit = 1280;                                                                                        \
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 200, .train_limit = train_limit, .test_limit = 500}); } \
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::tanh), nitro::nn::dense<32, 10>()); } \
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIn const& in) const { return m(in.img, ps, st); } \
  auto loss(nitro::Tensor const& y, LossIn const& in) const { return nitro::nn::logitcrossentropy(y, in.label, smoothing); }

struct Mlp {
  NITRO_TEST_MLP_BODY
  double learning_rate() const { return 3e-3; }
};
NITRO_EXPERIMENT(Mlp, smoothing, batch_size, max_epochs, train_limit);

template <class H>
std::vector<float> weights_of(H& h) {
  auto* p = h.param_buffer().values();
  return std::vector<float>(p, p + H::param_store_type::size);
}
double max_abs_diff(std::vector<float> const& a, std::vector<float> const& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, double(std::abs(a[i] - b[i])));
  return w;
}
}  // namespace optim_test

TEST_CASE("accum: k micro-batches make the step one batch k times larger makes") {
  nitro::Nitro big(Mlp{.batch_size = 128}, nitro::max_epochs = 1);
  nitro::Nitro small(Mlp{.batch_size = 32}, nitro::max_epochs = 1, nitro::accum = 4);
  CHECK(big.optimizer().horizon() == 1280 / 128);
  CHECK(small.optimizer().horizon() == 1280 / 128);
  big.train(false);
  small.train(false);
  CHECK(big.step() == 10);
  CHECK(small.step() == 10);
  CHECK(small.micro_steps() == 40);
  auto a = weights_of(big), b = weights_of(small);
  CHECK(max_abs_diff(a, b) < 2e-5);
  // the check can fail: without accumulation, four times the steps
  nitro::Nitro four(Mlp{.batch_size = 32}, nitro::max_epochs = 1);
  four.train(false);
  CHECK(four.step() == 40);
  CHECK(max_abs_diff(a, weights_of(four)) > 1e-3);
}

TEST_CASE("accum: an epoch with fewer batches than accum is an error naming both") {
  nitro::Nitro h(Mlp{.batch_size = 128, .train_limit = 300}, nitro::accum = 3);
  CHECK_THROWS_WITH_AS(h.train(false), doctest::Contains("E-OPT-016"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::Nitro(Mlp{}, nitro::accum = 0), doctest::Contains("E-OPT-015"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::Nitro(Mlp{}, nitro::gradient_clip_norm = -1.0), doctest::Contains("E-OPT-014"), nitro::error);
}

namespace optim_test {
struct Smoothed {
  NITRO_TEST_MLP_BODY
  double learning_rate() const { return 3e-3; }
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"smoothing"> = [](std::int64_t total) { return [total](std::int64_t t) { return 0.1 * double(t) / double(total); }; },
                               nitro::key<"eta"> = sched::cosine(3e-3)};
  }
};
NITRO_EXPERIMENT(Smoothed, smoothing, batch_size, max_epochs, train_limit);
}  // namespace optim_test

TEST_CASE("a schedule key reaches a Device field: written each step, read by the loss") {
  nitro::Nitro h(Smoothed{});
  auto const& split = h.data().split("train");
  nitro::data::loader<nitro::data::image_batch> ld(split, {.batch_size = 32, .shuffle = false, .drop_last = true, .prefetch = 1, .seed = 1});
  ld.start_epoch(0);
  const double total = double(h.optimizer().horizon());
  REQUIRE(total == 40);
  for (int s = 1; s <= 3; ++s) {
    h.train_step(*ld.next());
    CHECK(float(h.experiment().smoothing) == doctest::Approx(0.1 * s / total));
    CHECK(h.optimizer().field("default", "eta") == doctest::Approx(sched::cosine(3e-3)(40)(s)));
  }
  CHECK(h.optimizer().describe().find("smoothing = a factory of the horizon  ->  device: smoothing") != std::string::npos);
  // the optimizer's part of show(): keys with their source and binding, groups, rules, landings
  nitro::handle_description d;
  h.describe_optimizer(d);
  REQUIRE(d.schedules.size() == 2);
  CHECK(d.schedules[0].key == "smoothing");
  CHECK(d.schedules[0].source == "accessor");
  CHECK(d.schedules[0].binds_to == "device: smoothing (written each step)");
  CHECK(d.schedules[1].binds_to == "opt: default.eta (x1)");
  CHECK(d.schedules[1].curve == "cosine(0.003 -> 0)");
  REQUIRE(d.groups.size() == 1);
  CHECK(d.groups[0].params == 784 * 32 + 32 + 32 * 10 + 10);
  CHECK(d.optimizer == "adamw(beta1=0.9, beta2=0.999, eps=1e-08)");
  REQUIRE(d.landings.size() == 2);
  CHECK((d.landings[1].group == "default" && d.landings[1].field == "eta"));
  CHECK((d.landings[0].group.empty() && d.landings[0].field == "device.smoothing"));
  // the same by the run keyword, qualified; the keyword wins over the accessor
  nitro::Nitro k(Smoothed{}, nitro::schedules = nitro::schedule_map{nitro::key<"device.smoothing"> = 0.3});
  ld.start_epoch(0);
  k.train_step(*ld.next());
  CHECK(float(k.experiment().smoothing) == doctest::Approx(0.3));
  nitro::handle_description dk;
  k.describe_optimizer(dk);
  REQUIRE(dk.schedules.size() == 1);
  CHECK(dk.schedules[0].source == "keyword");
  CHECK(k.optimizer().field("default", "eta") == doctest::Approx(3e-3));
}

namespace optim_test {
struct Bad {
  NITRO_TEST_MLP_BODY
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"eta"> = [](std::int64_t total) { return [total](std::int64_t t) { return t < total ? 1e-3 : -1e-3; }; }};
  }
};
struct BadRate {
  NITRO_TEST_MLP_BODY
  double learning_rate(nitro::default_group) const { return -1.0; }
};
struct ZeroBase {
  NITRO_TEST_MLP_BODY
  double learning_rate() const { return 0.0; }
  double learning_rate(nitro::default_group) const { return 1e-3; }
};
struct BadBeta {
  NITRO_TEST_MLP_BODY
  auto optimizer() const { return optim::adam({.beta1 = 1.5}); }
};
NITRO_EXPERIMENT(Bad, smoothing, batch_size, max_epochs, train_limit);
NITRO_EXPERIMENT(BadRate, smoothing, batch_size, max_epochs, train_limit);
NITRO_EXPERIMENT(ZeroBase, smoothing, batch_size, max_epochs, train_limit);
NITRO_EXPERIMENT(BadBeta, smoothing, batch_size, max_epochs, train_limit);
}  // namespace optim_test

TEST_CASE("values out of range are errors at setup, never at step N") {
  CHECK_THROWS_WITH_AS(nitro::Nitro(Bad{}), doctest::Contains("E-SCHED-010: the schedule for 'eta' gives -0.001 at step 40 of 40"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::Nitro(BadRate{}), doctest::Contains("E-OPT-010"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::Nitro(ZeroBase{}), doctest::Contains("E-OPT-012"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::Nitro(BadBeta{}), doctest::Contains("group 'default': adam.beta1 is 1.5; it must be in [0, 1)"), nitro::error);
}

namespace optim_test {
struct XY { BOOST_HANA_DEFINE_STRUCT(XY, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct XIn { BOOST_HANA_DEFINE_STRUCT(XIn, (nitro::Tensor, x)); };
struct YIn { BOOST_HANA_DEFINE_STRUCT(YIn, (nitro::Tensor, y)); };
template <bool Adaptive, bool Frozen = false>
struct Sharp {
  nitro::data::dataset<XY> data;
  std::int64_t batch_size = 8;
  auto build_model() const { return nitro::nn::dense<3, 2>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, XIn const& in) const { return m(in.x, ps, st); }
  auto loss(nitro::Tensor const& y, YIn const& in) const { return nitro::nn::mse(y, in.y); }
  double learning_rate() const { return 0.1; }
  auto optimizer() const {
    if constexpr (Adaptive) return optim::asam(optim::sgd({.momentum = 0.9}), {.rho = 0.5, .adaptive_eta = 0.01});
    else return optim::sam(optim::sgd({.momentum = 0.9}), {.rho = 0.05});
  }
  bool no_perturb(auto, nitro::Tensor const&) const { return Frozen; }
};
NITRO_EXPERIMENT(Sharp, data, batch_size);

template <bool Adaptive, bool Frozen = false>
auto sharp(json const& c) {
  auto x = c["x"].get<std::vector<float>>(), y = c["y"].get<std::vector<float>>();
  nitro::data::dataset<XY> d{"xy", {{"train", XY{nitro::Tensor::from(x, {3, 8}), nitro::Tensor::from(y, {2, 8})}}}, "fixture"};
  return Sharp<Adaptive, Frozen>{d};
}
// torch's Linear weight [out, in] row-major -> nitro's [out, in] column-major
template <class H>
void set_linear(H& h, json const& p) {
  auto w = p["weight"].get<std::vector<float>>(), b = p["bias"].get<std::vector<float>>();
  using S = typename H::param_store_type;
  float* v = h.param_buffer().values();
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) v[S::leaves[0].offset + o + 2 * i] = w[std::size_t(o * 3 + i)];
  for (int o = 0; o < 2; ++o) v[S::leaves[1].offset + o] = b[std::size_t(o)];
}
template <class H>
double linear_error(H& h, json const& p) {
  auto w = p["weight"].get<std::vector<double>>(), b = p["bias"].get<std::vector<double>>();
  using S = typename H::param_store_type;
  float const* v = h.param_buffer().values();
  double worst = 0;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) worst = std::max(worst, std::abs(v[S::leaves[0].offset + o + 2 * i] - w[std::size_t(o * 3 + i)]));
  for (int o = 0; o < 2; ++o) worst = std::max(worst, std::abs(v[S::leaves[1].offset + o] - b[std::size_t(o)]));
  return worst;
}
}  // namespace optim_test

TEST_CASE("SAM and ASAM: two passes, matching a PyTorch reference (davda54/sam's steps, ASAM's |w| + eta)") {
  json all = load("sam.json");
  auto run = []<bool Adaptive>(json const& c) {
    nitro::Nitro h(sharp<Adaptive>(c), nitro::max_epochs = 3);
    static_assert(decltype(h)::optimizer_type::two_pass);
    set_linear(h, c["init"]);
    auto const& batch = h.data().split("train").all();
    double worst = 0;
    for (std::size_t s = 0; s < c["params"].size(); ++s) {
      double loss = h.train_step(batch);
      CHECK(loss == doctest::Approx(c["losses"][s].get<double>()).epsilon(1e-5));
      worst = std::max(worst, linear_error(h, c["params"][s]));
    }
    return worst;
  };
  CHECK(run.template operator()<false>(all["cases"][0]) < 2e-6);
  CHECK(run.template operator()<true>(all["cases"][1]) < 2e-6);
  // no_perturb on every leaf: one pass's worth of update, which is not the reference
  nitro::Nitro frozen(sharp<false, true>(all["cases"][0]), nitro::max_epochs = 3);
  set_linear(frozen, all["cases"][0]["init"]);
  auto const& batch = frozen.data().split("train").all();
  for (int s = 0; s < 3; ++s) frozen.train_step(batch);
  CHECK(linear_error(frozen, all["cases"][0]["params"][2]) > 1e-5);
  CHECK(frozen.optimizer().describe().find("sam(sgd(momentum=0.9, dampening=0), rho=0.05)") != std::string::npos);
}

namespace optim_test {
struct Resumable {
  NITRO_TEST_MLP_BODY
  double learning_rate() const { return 3e-3; }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  auto optimizer(nitro::group<"encoder">) const { return optim::adamw({.lambda = 0.1}); }
  auto optimizer(nitro::group<"head">) const { return optim::sgd({.momentum = 0.9, .nesterov = true}); }
  double learning_rate(nitro::group<"head">) const { return 1e-2; }
  auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::w0; }
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = sched::one_cycle(3e-3)}; }
};
NITRO_EXPERIMENT(Resumable, smoothing, batch_size, max_epochs, train_limit);
}  // namespace optim_test

TEST_CASE("the optimizer's state exports and imports as named flat tensors: a resumed run is the same run") {
  auto batches = [](auto& h, auto&& f) {
    nitro::data::loader<nitro::data::image_batch> ld(h.data().split("train"), {.batch_size = 32, .shuffle = true, .drop_last = true, .prefetch = 1, .seed = 5});
    ld.start_epoch(0);
    for (int s = 0; s < 6; ++s) f(s, *ld.next());
  };
  nitro::Nitro straight(Resumable{});
  batches(straight, [&](int, auto const& b) { straight.train_step(b); });

  nitro::Nitro second(Resumable{}, nitro::seed = 2);  // another init and w0: the resume must overwrite everything
  const auto before = weights_of(second);
  std::vector<nitro::optim::state_entry> saved;
  std::vector<float> weights;
  {
    nitro::Nitro a(Resumable{});
    batches(a, [&](int s, auto const& b) { if (s < 3) a.train_step(b); });
    for (auto& e : a.optimizer().state_tensors()) {  // own copies, as a checkpoint file would hold
      if (auto* t = std::get_if<nitro::Tensor>(&e.value)) saved.push_back({e.name, t->clone()});
      else saved.push_back({e.name, std::get<nitro::Index>(e.value).clone()});
    }
    weights = weights_of(a);
  }
  std::memcpy(second.param_buffer().values(), weights.data(), weights.size() * sizeof(float));
  second.optimizer().load_state(saved);
  CHECK(second.step() == 3);
  batches(second, [&](int s, auto const& b) { if (s >= 3) second.train_step(b); });
  CHECK(second.step() == 6);
  auto want = weights_of(straight), got = weights_of(second);
  CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  CHECK(max_abs_diff(want, before) > 1e-3);  // the check can fail: another init is another run

  // a state that does not fit is a coded error
  auto broken = saved;
  broken.erase(broken.begin() + 1);
  CHECK_THROWS_WITH_AS(second.optimizer().load_state(broken), doctest::Contains("E-OPT-017"), nitro::error);
  broken = saved;
  broken.push_back({"optim.encoder.extra", nitro::Tensor::owned({3})});
  CHECK_THROWS_WITH_AS(second.optimizer().load_state(broken), doctest::Contains("E-OPT-017"), nitro::error);
  broken = saved;
  std::get<nitro::Tensor>(broken[1].value) = nitro::Tensor::owned({3});
  CHECK_THROWS_WITH_AS(second.optimizer().load_state(broken), doctest::Contains("E-OPT-017"), nitro::error);
}

TEST_CASE("w0 is build_model's initial weights unless the w0 keyword gives a tree") {
  nitro::Nitro other(Resumable{}, nitro::seed = 7);
  nitro::Nitro own(Resumable{});
  nitro::Nitro given(Resumable{}, nitro::w0 = other.params());
  using S = decltype(own)::param_store_type;
  auto anchor_of = [](auto& h) {
    for (auto& e : h.optimizer().state_tensors())
      if (e.name == "optim.encoder.anchor") return std::get<nitro::Tensor>(e.value).to_vector();
    FAIL("no encoder anchor");
    return std::vector<float>{};
  };
  auto span = [](auto& h) {
    float const* v = h.param_buffer().values() + S::groups[0].offset;
    return std::vector<float>(v, v + S::groups[0].size);
  };
  CHECK(anchor_of(own) == span(own));
  CHECK(anchor_of(given) == span(other));
  CHECK(anchor_of(given) != span(given));
}

// ---- on a slice of Fashion-MNIST -------------------------------------------------------------------
namespace optim_test {
template <bool TwoGroups>
struct Fashion {
  nitro::Device<float> smoothing{0.05f};
  std::int64_t batch_size = 64;
  int max_epochs = 3;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 500, .train_limit = 4000, .test_limit = 1000}); }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<784, 64>(nitro::nn::relu), nitro::nn::dense<64, 64>(nitro::nn::relu), nitro::nn::dense<64, 10>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, LossIn const& in) const { return nitro::nn::logitcrossentropy(y, in.label, smoothing); }
  auto metrics(nitro::Tensor const& y, LossIn const& in) const { return Metrics{.acc = {nitro::nn::correct_count(y, in.label), double(in.label.batch())}}; }
  double learning_rate() const { return 1e-2; }
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = sched::one_cycle(1e-2), nitro::key<"beta1"> = sched::one_cycle_momentum()}; }
  auto param_group(auto kp) const {
    if constexpr (TwoGroups && kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate(nitro::group<"encoder">) const requires TwoGroups { return 5e-3; }  // ratio 0.5
  auto decay_anchor(nitro::group<"encoder">) const requires TwoGroups { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(Fashion, smoothing, batch_size, max_epochs);
}  // namespace optim_test

TEST_CASE("on Fashion-MNIST: OneCycle trains; two groups (ratio 0.5, anchor w0) train as well") {
  nitro::Nitro one(Fashion<false>{});
  one.train(false);
  const double acc1 = one.evaluate("test").at("acc");
  nitro::Nitro two(Fashion<true>{});
  two.train(false);
  const double acc2 = two.evaluate("test").at("acc");
  MESSAGE("one group " << acc1 << ", two groups " << acc2);
  CHECK(acc1 > 0.80);  // 4000 images, 3 epochs (the full-data runs are examples/fashion_mlp)
  CHECK(acc2 > 0.80);
  CHECK(two.optimizer().group_infos()[0].ratio == doctest::Approx(0.5));
  CHECK(two.optimizer().group_infos()[0].anchor == "w0");
}

#undef NITRO_TEST_MLP_BODY
