// train/ and record/loggers/: the trainer's components, each on its own — run keywords and their
// records, metric reducers, EMA, early stopping, divergence, the run control the loop consults,
// loggers (console, JSONL, CSV, TensorBoard), history, show and cache_stats.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// ---- counting allocations (the accumulator and the EMA allocate nothing per batch) ---------------
#include "alloc_counter.hpp"
#include "../support/nitro_test.hpp"

namespace fs = std::filesystem;

namespace trainer_test {

using nitro_test::tmp_dir;
std::vector<std::string> lines_of(std::string const& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
std::string read_stream(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

// ---- experiments for keyword resolution ----
struct Plain {};
struct Fields {
  double ema = 0.999;
  int early_stop = 4;
  std::string monitor = "acc";
  int log_every_n_steps = 10;
};
struct Accessors {
  nitro::ema_options ema() const { return {.decay = 0.99, .warmup = true}; }
  nitro::monitor_spec monitor() const { return nitro::maximize("valid.acc"); }
  auto schedules() const { return nitro::ema_options{}; }  // any object: the optimizer room reads it
  bool check_divergence() const { return false; }
};
struct recording_logger : nitro::run_logger {
  std::shared_ptr<std::vector<std::string>> events = std::make_shared<std::vector<std::string>>();
  std::string describe() const override { return "recording"; }
  void on_setup(nitro::run_info const& info) override { events->push_back("setup:" + info.binding_report); }
  void on_step(std::int64_t step, int epoch, nitro::scalars s) override {
    std::string e = "step ";
    e += std::to_string(step);
    e += " epoch ";
    e += std::to_string(epoch);
    for (auto const& x : s) {
      e += ' ';
      e += x.name;
      e += '=';
      e += nitro::keyword_text(x.value);
    }
    events->push_back(e);
  }
  void on_eval(std::int64_t step, int, std::string_view split, nitro::metric_values const& m) override {
    std::string e = "eval ";
    e += split;
    e += " ";
    e += std::to_string(step);
    for (auto const& [k, v] : m.scalars) {
      e += ' ';
      e += k;
      e += '=';
      e += nitro::keyword_text(v);
    }
    events->push_back(e);
  }
  void on_end(nitro::run_status s, std::string_view reason) override { events->push_back(std::string("end ") + to_string(s) + " " + std::string(reason)); }
};
struct LoggerField {
  recording_logger logger;
};

// ---- metrics structs ----
struct Acc { BOOST_HANA_DEFINE_STRUCT(Acc, (nitro::mean_of, acc), (nitro::sum_of<double>, seen)); };
struct Confusion { BOOST_HANA_DEFINE_STRUCT(Confusion, (nitro::sum_of<nitro::Tensor>, confusion)); };
struct Pair { BOOST_HANA_DEFINE_STRUCT(Pair, (nitro::Tensor, score), (nitro::Tensor, label)); };
struct Ranking { BOOST_HANA_DEFINE_STRUCT(Ranking, (nitro::concat_of<Pair>, ranking), (nitro::concat_of<nitro::Tensor>, logits)); };

struct HostResidency {
  nitro::residency metrics_residency(nitro::hook::metrics) const { return nitro::residency::host; }
  nitro::residency metrics_residency(nitro::hook::finalize_metrics) const { return nitro::residency::device; }
};
struct Finalize {
  nitro::metric_values finalize_metrics(nitro::metric_values acc, std::string_view split) const {
    acc.scalars["error"] = 1.0 - acc.at("acc");
    acc.scalars["is_" + std::string(split)] = 1.0;
    return acc;
  }
};
struct FinalizeInPlace {
  void finalize_metrics(nitro::metric_values& acc, std::string_view) const { acc.scalars["acc"] *= 100.0; }
};

nitro::Tensor t(std::vector<float> v, nitro::shape s) { return nitro::Tensor::from(v, s); }

}  // namespace trainer_test

using namespace trainer_test;

// =====================================================================================================
TEST_SUITE("run keywords") {
TEST_CASE("one table — every record is a name the handle accepts, with a doc; every accepted name has a record") {
  const auto records = nitro::run_keywords(Plain{}).records();
  std::vector<std::string> accepted(std::begin(nitro::detail::run_keyword_names), std::end(nitro::detail::run_keyword_names));
  REQUIRE(records.size() + 1 == accepted.size());  // all but `checkpoint`, the deprecated spelling of weights
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].name == accepted[i]);  // the same order: the table's
    CHECK_FALSE(nitro::run_keyword_doc(records[i].name).empty());
  }
  CHECK(accepted.back() == "checkpoint");
  CHECK(nitro::run_keyword_doc("no_such_keyword").empty());
}

TEST_CASE("keyword, else accessor, else field, else default — for the keywords of this room") {
    nitro::run_keywords a(Plain{});
    CHECK(a.ema.source == nitro::keyword_source::fallback);
    CHECK_FALSE(a.ema.value.enabled());
    CHECK(a.early_stop.value.patience == 0);
    CHECK(a.monitor.value.qualified() == "valid.loss");
    CHECK(a.log_every_n_steps.value == 50);
    CHECK(a.check_divergence.value);
    CHECK(std::is_same_v<decltype(a.logger.value), nitro::default_loggers_t>);
    CHECK(std::is_same_v<decltype(a.schedules.value), nitro::framework_default>);

    nitro::run_keywords f(Fields{});
    CHECK(f.ema.source == nitro::keyword_source::field);
    CHECK(f.ema.value.decay == 0.999);  // a number converts to ema_options{.decay = number}
    CHECK(f.early_stop.value.patience == 4);
    CHECK(f.monitor.value.qualified() == "valid.acc");
    CHECK(f.monitor.value.mode == nitro::monitor_spec::direction::min);  // a bare name minimises, as Lightning does
    CHECK(f.log_every_n_steps.source == nitro::keyword_source::field);

    nitro::run_keywords g(Accessors{});
    CHECK(g.ema.source == nitro::keyword_source::accessor);
    CHECK(g.ema.value.warmup);
    CHECK(g.monitor.value.mode == nitro::monitor_spec::direction::max);
    CHECK(g.schedules.source == nitro::keyword_source::accessor);
    CHECK_FALSE(g.check_divergence.value);

    nitro::run_keywords k(Fields{}, nitro::ema = 0.5, nitro::early_stop = nitro::early_stopping{.patience = 2, .min_delta = 0.01},
                          nitro::monitor = nitro::maximize("train.acc"), nitro::log_every_n_steps = 7);
    CHECK(k.ema.source == nitro::keyword_source::keyword);
    CHECK(k.ema.value.decay == 0.5);
    CHECK(k.early_stop.value.min_delta == 0.01);
    CHECK(k.monitor.value.split() == "train");
    CHECK(k.monitor.value.name() == "acc");
    CHECK(k.log_every_n_steps.value == 7);
  }

  TEST_CASE("generic keywords keep their value's type: loggers from a keyword or a field") {
    recording_logger r;
    nitro::run_keywords k(Plain{}, nitro::logger = r);
    CHECK(std::is_same_v<decltype(k.logger.value), recording_logger>);
    CHECK(k.logger.source == nitro::keyword_source::keyword);
    nitro::run_keywords f(LoggerField{});
    CHECK(f.logger.source == nitro::keyword_source::field);
    auto set = nitro::to_logger_set(f.logger.value);
    CHECK(set.size() == 1);
    CHECK(set.describe() == "recording");
    nitro::run_keywords n(Plain{}, nitro::logger = nitro::no_loggers);
    CHECK(nitro::to_logger_set(n.logger.value).empty());
    CHECK_FALSE(nitro::to_logger_set(n.logger.value).wants_defaults());
    CHECK(nitro::to_logger_set(nitro::run_keywords(Plain{}).logger.value).wants_defaults());
  }

  TEST_CASE("construction facts are keywords or nothing; checkpoint is the deprecated spelling of weights") {
    nitro::run_keywords k(Plain{}, nitro::weights = "w.safetensors", nitro::restore_best = true, nitro::load_ema = false);
    CHECK(k.weights.value == std::string("w.safetensors"));
    CHECK(k.weights.source == nitro::keyword_source::keyword);
    CHECK(k.resume.source == nitro::keyword_source::fallback);
    CHECK_FALSE(k.load_ema.value);
    CHECK(k.restore_optimizer.value);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    nitro::run_keywords c(Plain{}, nitro::kw::checkpoint = "old.safetensors");
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    CHECK(c.weights.value == std::string("old.safetensors"));
    CHECK(c.checkpoint_spelling);
    auto records = c.records();
    auto it = std::find_if(records.begin(), records.end(), [](auto const& r) { return r.name == "weights"; });
    REQUIRE(it != records.end());
    CHECK(it->value == "old.safetensors");
    CHECK(it->fact);
    CHECK(it->note.find("deprecated") != std::string::npos);
  }

  TEST_CASE("a record for every keyword: name, value as text, source") {
    nitro::run_keywords k(Fields{}, nitro::seed = 9, nitro::ema = nitro::ema_options{.decay = 0.99, .debias = true});
    auto r = k.records();
    std::vector<std::string> names;
    for (auto const& x : r) names.push_back(x.name);
    CHECK(names == std::vector<std::string>{"seed", "run_dir", "n_devs", "accum", "max_epochs", "schedules", "gradient_clip_norm",
                                            "check_divergence", "autolog_schedules", "log_every_n_steps", "logger", "checkpointer",
                                            "early_stop", "monitor", "eval_loss", "ema", "batch_size", "max_steps", "eval_every",
                                            "diagnostics", "data", "weights", "resume", "run_ref", "w0", "restore_optimizer",
                                            "restore_best", "eval_weights", "load_ema", "device", "replicas"});
    CHECK(r[0].value == "9");
    CHECK(r[0].source == nitro::keyword_source::keyword);
    CHECK(r[12].value == "patience=4 min_delta=0");
    CHECK(r[12].source == nitro::keyword_source::field);
    CHECK(r[13].value == "valid.acc (min)");
    CHECK(r[15].value == "decay=0.99 debias");
    CHECK(r[17].value == "0");  // max_steps: max_epochs decides
    CHECK(r[20].value == "none");  // no data
    CHECK_FALSE(r[16].fact);
    CHECK_FALSE(r[19].fact);
    CHECK(r[21].fact);
    std::string table = nitro::keyword_table(r);
    CHECK(table.find("  seed                9") == 0);
    CHECK(table.find("early_stop          patience=4 min_delta=0") != std::string::npos);
  }

  TEST_CASE("a typed keyword given as an optional: a value is the keyword, an empty one is not given") {
    // the command line passes its overrides this way: one handle type whether or not --steps was given
    nitro::run_keywords given(Fields{}, nitro::max_steps = std::optional<int>(40), nitro::log_every_n_steps = std::optional<long>(3));
    CHECK(given.max_steps.value == 40);
    CHECK(given.max_steps.source == nitro::keyword_source::keyword);
    CHECK(given.log_every_n_steps.value == 3);
    nitro::run_keywords empty(Fields{}, nitro::max_steps = std::optional<int>{}, nitro::log_every_n_steps = std::optional<long>{});
    CHECK(std::is_same_v<decltype(empty), decltype(given)>);
    CHECK(empty.max_steps.value == 0);
    CHECK(empty.max_steps.source == nitro::keyword_source::fallback);
    CHECK(empty.log_every_n_steps.value == 10);  // the field decides
    CHECK(empty.log_every_n_steps.source == nitro::keyword_source::field);
    // a construction fact given as an empty optional is not given either
    nitro::run_keywords fact(Plain{}, nitro::run_ref = std::optional<std::string>{});
    CHECK(fact.run_ref.source == nitro::keyword_source::fallback);
    CHECK(fact.records()[23].name == "run_ref");
    CHECK(fact.records()[23].value == "none");
  }

  TEST_CASE("values a type cannot rule out are coded errors naming the keyword and its source") {
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::log_every_n_steps = 0).validate(),
                         doctest::Contains("E-KW-007: the run keyword log_every_n_steps is 0 (from the keyword)"), nitro::error);
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::n_devs = 0).validate(), doctest::Contains("E-KW-007"), nitro::error);
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::max_steps = -5).validate(), doctest::Contains("E-KW-007: the run keyword max_steps is -5"),
                         nitro::error);
    // accum and gradient_clip_norm are the optimizer program's to check (E-OPT-015, E-OPT-014), once
    CHECK_NOTHROW(nitro::run_keywords(Plain{}, nitro::accum = -1).validate());
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::ema = 1.5).validate(), doctest::Contains("E-EMA-001"), nitro::error);
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::early_stop = -2).validate(), doctest::Contains("E-STOP-001"), nitro::error);
    CHECK_THROWS_WITH_AS(nitro::run_keywords(Plain{}, nitro::monitor = "valid.").validate(), doctest::Contains("E-KW-007"), nitro::error);
    CHECK_NOTHROW(nitro::run_keywords(Fields{}).validate());
  }
}

// =====================================================================================================
TEST_SUITE("metrics") {
  TEST_CASE("x => n is summed, then divided by the summed count: a per-sample mean over unequal batches") {
    nitro::metric_accumulator acc;
    acc.add(Acc{{3.0, 4.0}, {4.0}});   // 3 of 4 correct
    acc.add(Acc{{1.0, 1.0}, {1.0}});   // 1 of 1
    acc.add(Acc{{0.0, 5.0}, {5.0}});   // 0 of 5
    auto r = acc.result();
    CHECK(r.at("acc") == doctest::Approx(4.0 / 10.0));  // not the mean of the batch means (0.583)
    CHECK(r.at("seen") == 10.0);                         // => :sum is never divided
    CHECK(r.batches == 3);
    CHECK_THROWS_WITH_AS(r.at("accuracy"), doctest::Contains("E-METRIC-001: no metric called 'accuracy' (known: acc, seen)"), nitro::error);
  }

  TEST_CASE("=> :sum of tensors is the split's matrix; a changed shape is an error") {
    nitro::metric_accumulator acc;
    acc.add(Confusion{{t({1, 0, 0, 2}, {2, 2})}});
    acc.add(Confusion{{t({0, 3, 1, 0}, {2, 2})}});
    auto r = acc.result();
    REQUIRE(r.has_tensor("confusion"));
    CHECK(r.tensor("confusion").shape() == nitro::shape{2, 2});
    CHECK(r.tensor("confusion").to_vector() == std::vector<float>{1, 3, 1, 2});
    CHECK_THROWS_WITH_AS(acc.add(Confusion{{t({1, 2, 3}, {3})}}), doctest::Contains("E-METRIC-002"), nitro::error);
  }

  TEST_CASE("=> :concat keeps every sample, aligned, batch last") {
    nitro::metric_accumulator acc;
    acc.reserve_samples(5);
    acc.add(Ranking{{Pair{t({0.9f, 0.2f}, {2}), t({1, 0}, {2})}}, {t({1, 2, 3, 4}, {2, 2})}});
    acc.add(Ranking{{Pair{t({0.4f, 0.8f, 0.1f}, {3}), t({0, 1, 1}, {3})}}, {t({5, 6, 7, 8, 9, 10}, {2, 3})}});
    auto r = acc.result();
    CHECK(r.tensor("ranking.score").to_vector() == std::vector<float>{0.9f, 0.2f, 0.4f, 0.8f, 0.1f});
    CHECK(r.tensor("ranking.label").to_vector() == std::vector<float>{1, 0, 0, 1, 1});
    CHECK(r.tensor("logits").shape() == nitro::shape{2, 5});
    CHECK(r.tensor("logits")(1, 4) == 10.0f);
    // members of one concat struct must agree on the batch
    CHECK_THROWS_WITH_AS(acc.add(Ranking{{Pair{t({0.1f}, {1}), t({1, 0}, {2})}}, {t({1, 2}, {2, 1})}}), doctest::Contains("E-METRIC-007"),
                         nitro::error);
  }

  TEST_CASE("no metrics hook: the loss is the metric, with a count of 1 per batch") {
    nitro::metric_accumulator acc;
    acc.add_loss(1.0);
    acc.add_loss(2.0);
    acc.add_loss(6.0);
    auto r = acc.result();
    CHECK(r.at("loss") == 3.0);
    CHECK(r.batches == 3);
    CHECK(nitro::evaluation_reports_loss(true, false, false));   // no metrics: the loss, whatever eval_loss says
    CHECK_FALSE(nitro::evaluation_reports_loss(true, true, false));
    CHECK(nitro::evaluation_reports_loss(true, true, true));
    CHECK_FALSE(nitro::evaluation_reports_loss(false, true, true));
  }

  TEST_CASE("the loss beside the metrics; a metric called loss collides with it") {
    struct Named { BOOST_HANA_DEFINE_STRUCT(Named, (nitro::mean_of, loss)); };
    nitro::metric_accumulator ok;
    ok.add_loss(0.5);
    ok.add(Acc{{1.0, 2.0}, {2.0}});
    ok.add_loss(1.5);
    ok.add(Acc{{2.0, 2.0}, {2.0}});
    auto r = ok.result();
    CHECK(r.at("loss") == 1.0);
    CHECK(r.at("acc") == 0.75);
    CHECK(r.batches == 2);
    nitro::metric_accumulator bad;
    bad.add_loss(0.5);
    CHECK_THROWS_WITH_AS(bad.add(Named{{1.0, 1.0}}), doctest::Contains("E-METRIC-007: two metrics are called 'loss'"), nitro::error);
  }

  TEST_CASE("metrics_residency: device by default, host on request; recorded in the result") {
    CHECK(nitro::metrics_residency_of<nitro::hook::metrics>(Plain{}) == nitro::residency::device);
    CHECK(nitro::metrics_residency_of<nitro::hook::finalize_metrics>(Plain{}) == nitro::residency::host);
    CHECK(nitro::metrics_residency_of<nitro::hook::metrics>(HostResidency{}) == nitro::residency::host);
    CHECK(nitro::metrics_residency_of<nitro::hook::finalize_metrics>(HostResidency{}) == nitro::residency::device);

    nitro::metric_accumulator dev(nitro::metrics_residency_of<nitro::hook::metrics>(Plain{}));
    nitro::metric_accumulator host(nitro::metrics_residency_of<nitro::hook::metrics>(HostResidency{}));
    for (int i = 0; i < 4; ++i) {
      dev.add(Acc{{1.0, 2.0}, {2.0}});
      host.add(Acc{{1.0, 2.0}, {2.0}});
    }
    auto rd = dev.result();
    auto rh = host.result();
    CHECK(rd.at("acc") == rh.at("acc"));  // the same numbers either way
    CHECK(rd.accumulated_on == nitro::residency::device);
    CHECK(rh.accumulated_on == nitro::residency::host);
    CHECK(rd.host_crossings == 0);  // host values: nothing to copy under either choice
    CHECK(rh.host_crossings == 0);
    CHECK(nitro::finalize_metrics(HostResidency{}, rh, "valid").finalized_on == nitro::residency::device);
    CHECK_THROWS_WITH_AS((void)nitro::metric_accumulator{nitro::residency::graph_const}, doctest::Contains("E-METRIC-005"), nitro::error);
  }

  TEST_CASE("finalize_metrics sees the reduced values and the split; returned or edited in place") {
    nitro::metric_accumulator acc;
    acc.add(Acc{{3.0, 4.0}, {4.0}});
    auto r = nitro::finalize_metrics(Finalize{}, acc.result(), "valid");
    CHECK(r.at("error") == doctest::Approx(0.25));
    CHECK(r.at("is_valid") == 1.0);
    CHECK(r.at("acc") == 0.75);
    CHECK(r.finalized_on == nitro::residency::host);
    CHECK(r.batches == 1);
    CHECK(nitro::finalize_metrics(FinalizeInPlace{}, acc.result(), "test").at("acc") == doctest::Approx(75.0));
    CHECK(nitro::finalize_metrics(Plain{}, acc.result(), "test").at("acc") == 0.75);  // no hook: unchanged
  }

  TEST_CASE("clear() starts a new split and keeps the layout") {
    nitro::metric_accumulator acc;
    acc.add(Acc{{3.0, 4.0}, {4.0}});
    acc.clear();
    acc.add(Acc{{1.0, 4.0}, {4.0}});
    CHECK(acc.result().at("acc") == 0.25);
    CHECK(acc.slot_count() == 2);
  }

  TEST_CASE("accumulating allocates nothing per batch after the first (reserved concatenations)") {
    if (!NITRO_TEST_ALLOC_COUNTING) return;
    nitro::metric_accumulator acc;
    acc.reserve_samples(40);
    auto score = t({0.5f, 0.25f, 0.125f, 1.0f}, {4});
    auto label = t({1, 0, 1, 0}, {4});
    auto logits = t({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
    auto confusion = t({1, 0, 0, 1}, {2, 2});
    struct All {
      BOOST_HANA_DEFINE_STRUCT(All, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, confusion), (nitro::concat_of<Pair>, ranking),
                               (nitro::concat_of<nitro::Tensor>, logits));
    };
    All m{{2.0, 4.0}, {confusion}, {Pair{score, label}}, {logits}};
    acc.add_loss(0.5);
    acc.add(m);  // the first batch lays out the slots
    long n;
    {
      counting c;
      for (int i = 0; i < 9; ++i) {
        acc.add_loss(0.5);
        acc.add(m);
      }
      n = c.count();
    }
    CHECK(n == 0);
    auto r = acc.result();
    CHECK(r.tensor("ranking.score").shape() == nitro::shape{40});
    CHECK(r.tensor("confusion")[0] == 10.0f);
    // the buffers were found big enough: the metric-buffer cache reports hits
    CHECK(nitro::cache_stats().cache("metrics.accumulator.buffers").hits >= 27);
  }
}

// =====================================================================================================
TEST_SUITE("ema") {
  TEST_CASE("constant decay: the average starts at the weights and moves (1 - d) of the way each step") {
    std::vector<float> w = {1.0f, -2.0f, 4.0f};
    nitro::ema_weights ema({.decay = 0.9}, w.data(), 3);
    const std::vector<float> p = {0.0f, 0.0f, 1.0f};
    for (int s = 1; s <= 10; ++s) CHECK(ema.update(p.data(), s));
    const double k = std::pow(0.9, 10);
    CHECK(ema.values()[0] == doctest::Approx(1.0 * k).epsilon(1e-5));
    CHECK(ema.values()[1] == doctest::Approx(-2.0 * k).epsilon(1e-5));
    CHECK(ema.values()[2] == doctest::Approx(1.0 + 3.0 * k).epsilon(1e-5));
    CHECK(ema.updates() == 10);
  }

  TEST_CASE("warmup follows timm's ModelEmaV3: 1 - (1 + (t-1)/gamma)^-power, capped at the decay") {
    nitro::ema_options o{.decay = 0.999, .warmup = true};
    CHECK(o.decay_at(1) == 0.0);  // the first update copies
    CHECK(o.decay_at(2) == doctest::Approx(1.0 - std::pow(2.0, -2.0 / 3.0)));
    CHECK(o.decay_at(10) == doctest::Approx(1.0 - std::pow(10.0, -2.0 / 3.0)));
    CHECK(o.decay_at(1000000) == 0.999);
    nitro::ema_options g{.decay = 0.99, .warmup = true, .warmup_gamma = 4.0, .warmup_power = 0.75, .min_decay = 0.5};
    CHECK(g.decay_at(2) == doctest::Approx(0.5));  // 1 - 1.25^-0.75 = 0.154, raised to min_decay
    CHECK(g.decay_at(40) == doctest::Approx(1.0 - std::pow(1.0 + 39.0 / 4.0, -0.75)));
  }

  TEST_CASE("debias equals Optax's zero-initialised, bias-corrected average") {
    const double d = 0.9;
    std::vector<float> w = {5.0f};
    nitro::ema_weights ema({.decay = d, .debias = true}, w.data(), 1);
    double m = 0.0;  // optax: m = d m + (1 - d) x; value = m / (1 - d^t)
    const double xs[] = {1.0, 3.0, -2.0, 0.5, 7.0, 2.0};
    for (int t = 1; t <= 6; ++t) {
      float x = static_cast<float>(xs[t - 1]);
      ema.update(&x, t);
      m = d * m + (1 - d) * xs[t - 1];
      CHECK(ema.values()[0] == doctest::Approx(m / (1 - std::pow(d, t))).epsilon(1e-5));
    }
  }

  TEST_CASE("start_step copies the weights until then; every updates on every n-th step") {
    std::vector<float> w = {0.0f};
    nitro::ema_weights ema({.decay = 0.5, .start_step = 2, .every = 2}, w.data(), 1);
    float x = 8.0f;
    ema.update(&x, 1);
    CHECK(ema.values()[0] == 8.0f);  // copied
    x = 4.0f;
    ema.update(&x, 2);
    CHECK(ema.values()[0] == 4.0f);  // still copying
    x = 0.0f;
    CHECK_FALSE(ema.update(&x, 3));  // (3 - 2) % 2 != 0
    CHECK(ema.update(&x, 4));
    CHECK(ema.values()[0] == 2.0f);
  }

  TEST_CASE("an evaluation with the averaged weights swaps them in and back") {
    std::vector<float> w = {1.0f, 2.0f};
    nitro::ema_weights ema({.decay = 0.5}, w.data(), 2);
    std::vector<float> live = {3.0f, 6.0f};
    ema.update(live.data(), 1);  // ema = (2, 4)
    {
      nitro::ema_scope scope(ema, live.data());
      CHECK(live == std::vector<float>{2.0f, 4.0f});
    }
    CHECK(live == std::vector<float>{3.0f, 6.0f});
    CHECK(ema.values()[1] == 4.0f);
  }

  TEST_CASE("options that describe no average are E-EMA-001; updates allocate nothing") {
    std::vector<float> w(1000, 1.0f);
    CHECK_THROWS_WITH_AS(nitro::ema_weights({.decay = 1.0}, w.data(), 1000), doctest::Contains("E-EMA-001"), nitro::error);
    CHECK_THROWS_WITH_AS(nitro::ema_weights({.decay = 0.9, .warmup = true, .debias = true}, w.data(), 1000), doctest::Contains("E-EMA-001"),
                         nitro::error);
    nitro::ema_weights ema({.decay = 0.99, .warmup = true}, w.data(), 1000);
    if (NITRO_TEST_ALLOC_COUNTING) {
      counting c;
      for (int s = 1; s <= 50; ++s) ema.update(w.data(), s);
      CHECK(c.count() == 0);
    }
  }
}

// =====================================================================================================
TEST_SUITE("early stop and divergence") {
  TEST_CASE("the monitor names split.metric; a bare name is on valid") {
    CHECK(nitro::monitor_spec{"acc"}.qualified() == "valid.acc");
    CHECK(nitro::monitor_spec{"train.loss"}.split() == "train");
    CHECK(nitro::maximize("test.acc").describe() == "test.acc (max)");
  }

  TEST_CASE("patience counts evaluations without an improvement (Lightning's rule)") {
    nitro::early_stopper s({.patience = 2}, nitro::minimize("valid.loss"));
    CHECK(s.update(1.0, 10).improved);
    CHECK(s.update(0.9, 20).improved);
    auto v = s.update(0.95, 30);
    CHECK_FALSE(v.improved);
    CHECK_FALSE(v.stop);
    CHECK(s.wait() == 1);
    v = s.update(0.91, 40);
    CHECK(v.stop);
    CHECK(s.best() == 0.9);
    CHECK(s.best_step() == 20);
    CHECK(s.reason() == "early stop: valid.loss did not improve on 0.9 (step 20) by more than 0 for 2 evaluations");
  }

  TEST_CASE("min_delta: a smaller change is no improvement; max mode looks up") {
    nitro::early_stopper s({.patience = 3, .min_delta = 0.1}, nitro::maximize("valid.acc"));
    CHECK(s.update(0.5, 1).improved);
    CHECK_FALSE(s.update(0.55, 2).improved);  // +0.05 < min_delta
    CHECK(s.update(0.61, 3).improved);
    CHECK_FALSE(s.update(0.7, 4).improved);   // +0.09
    CHECK_FALSE(s.update(0.2, 5).improved);
    CHECK(s.update(0.69, 6).stop);
  }

  TEST_CASE("a NaN monitored value stops at once; without patience nothing stops but the best is kept") {
    nitro::early_stopper s({.patience = 5}, nitro::minimize("valid.loss"));
    s.update(1.0, 1);
    CHECK(s.update(std::nan(""), 2).stop);
    CHECK(s.reason().find("is nan") != std::string::npos);
    nitro::early_stopper off({}, nitro::minimize("valid.loss"));
    for (int i = 0; i < 20; ++i) CHECK_FALSE(off.update(1.0 + i, i).stop);
    CHECK(off.best() == 1.0);
  }

  TEST_CASE("divergence: NaN or infinite loss") {
    nitro::divergence_detector d(nitro::divergence_check{});
    CHECK_FALSE(d.check(2.3, 1));
    CHECK(d.check(std::nan(""), 2));
    CHECK(d.diverged_at() == 2);
    CHECK(d.reason() == "the loss is NaN at step 2");
    nitro::divergence_detector i(nitro::divergence_check{});
    CHECK(i.check(-INFINITY, 1));
    CHECK(i.reason() == "the loss is -Inf at step 1");
  }

  TEST_CASE("divergence: a blow-up over the running baseline, after the warm-up") {
    nitro::divergence_detector d({.blowup = 100.0, .warmup_steps = 20});
    CHECK_FALSE(d.check(1000.0, 1));  // during the warm-up only NaN/Inf count
    nitro::divergence_detector e({.blowup = 100.0, .warmup_steps = 20});
    for (int s = 1; s <= 30; ++s) CHECK_FALSE(e.check(1.0 + 0.01 * (s % 3), s));
    CHECK(e.baseline() == doctest::Approx(1.01).epsilon(0.01));
    nitro::divergence_detector f = e;
    CHECK_FALSE(e.check(50.0, 31));  // 50x: a bad batch, not divergence
    CHECK(f.check(150.0, 31));
    CHECK(f.reason().find("the loss 150 at step 31 is more than 100 times its running baseline 1.0") == 0);
    nitro::divergence_detector neg({.warmup_steps = 2});
    for (int s = 1; s <= 10; ++s) CHECK_FALSE(neg.check(-1.0, s));
    CHECK_FALSE(neg.check(1e9, 11));  // a baseline at or below zero: NaN/Inf only
    nitro::divergence_detector off({.enabled = false});
    CHECK_FALSE(off.check(std::nan(""), 1));
    CHECK_THROWS_WITH_AS(nitro::divergence_detector({.blowup = 0.5}), doctest::Contains("E-DIVERGE-001"), nitro::error);
  }
}

// =====================================================================================================
namespace trainer_test {
nitro::run_info info_for(std::int64_t steps_per_epoch, int epochs, std::string report = "REPORT") {
  nitro::run_info i;
  i.experiment = "Exp<4>";
  i.binding_report = std::move(report);
  i.steps_per_epoch = steps_per_epoch;
  i.max_epochs = epochs;
  i.total_steps = steps_per_epoch * epochs;
  i.batch_size = 8;
  return i;
}
nitro::metric_values values(std::initializer_list<std::pair<char const*, double>> v) {
  nitro::metric_values m;
  for (auto const& [k, x] : v) m.scalars[k] = x;
  return m;
}
}  // namespace trainer_test

TEST_SUITE("run control") {
  TEST_CASE("log_every_n_steps: the mean loss since the last report, with every scheduled value") {
    auto rec = std::make_shared<recording_logger>();
    nitro::run_control rc({.log_every_n_steps = 3}, nitro::loggers(rec));
    auto eta = rc.schedules().declare("eta");
    CHECK(rc.schedules().declare("eta") == eta);
    std::vector<float> p(4, 0.0f);
    rc.begin(info_for(5, 2), p.data(), 4);
    for (int s = 1; s <= 7; ++s) {
      rc.schedules().set(eta, 0.1 * s);
      CHECK(rc.after_step(s, 1 + (s - 1) / 5, 1 + (s - 1) % 5, double(s), p.data(), 8));
    }
    rc.end();
    auto const& ev = *rec->events;
    REQUIRE(ev.size() == 5);
    CHECK(ev[0] == "setup:REPORT");
    CHECK(ev[1] == "step 3 epoch 1 loss=2 eta=0.3");
    CHECK(ev[2] == "step 6 epoch 2 loss=5 eta=0.6");
    CHECK(ev[3] == "step 7 epoch 2 loss=7 eta=0.7");  // the last, partial window at the end
    CHECK(ev[4] == "end finished ");
    CHECK(rc.status() == nitro::run_status::finished);
    CHECK(rc.history().size() == 3);
    CHECK(rc.history().columns() == std::vector<std::string>{"loss", "eta"});
    CHECK_THROWS_WITH_AS(rc.schedules().declare("lambda"), doctest::Contains("E-LOG-003"), nitro::error);
  }

  TEST_CASE("autolog_schedules off: only the loss") {
    auto rec = std::make_shared<recording_logger>();
    nitro::run_control rc({.log_every_n_steps = 2, .autolog_schedules = false}, nitro::loggers(rec));
    rc.schedules().declare("eta");
    float p = 0;
    rc.begin(info_for(2, 1), &p, 1);
    rc.after_step(1, 1, 1, 1.0, &p, 8);
    rc.after_step(2, 1, 2, 3.0, &p, 8);
    CHECK((*rec->events)[1] == "step 2 epoch 1 loss=2");
  }

  TEST_CASE("a diverged loss ends the run: status diverged, the step logged, the EMA untouched") {
    auto rec = std::make_shared<recording_logger>();
    nitro::run_control rc({.ema = {.decay = 0.5}, .log_every_n_steps = 100}, nitro::loggers(rec));
    float p = 2.0f;
    rc.begin(info_for(10, 1), &p, 1);
    CHECK(rc.after_step(1, 1, 1, 0.7, &p, 8));
    p = 1000.0f;
    CHECK_FALSE(rc.after_step(2, 1, 2, std::nan(""), &p, 8));
    CHECK(rc.should_stop());
    CHECK(rc.status() == nitro::run_status::diverged);
    CHECK(rc.ema().values()[0] == 2.0f);  // the diverged weights were not averaged in
    rc.end();
    CHECK(rec->events->back() == "end diverged the loss is NaN at step 2");
    CHECK((*rec->events)[1].find("step 2 epoch 1 loss=nan") == 0);
  }

  TEST_CASE("early stopping through after_eval; the monitored metric must exist") {
    auto rec = std::make_shared<recording_logger>();
    nitro::run_control rc({.early_stop = {.patience = 1}, .monitor = nitro::maximize("valid.acc")}, nitro::loggers(rec));
    float p = 0;
    rc.begin(info_for(10, 5), &p, 1);
    CHECK(rc.after_eval(10, 1, "valid", values({{"acc", 0.5}})));
    CHECK(rc.last_eval_improved());
    CHECK(rc.after_eval(10, 1, "train", values({{"acc", 0.1}})));  // another split: not monitored
    CHECK_FALSE(rc.after_eval(20, 2, "valid", values({{"acc", 0.4}})));
    CHECK(rc.status() == nitro::run_status::stopped);
    rc.end();
    CHECK(rec->events->back().find("end stopped early stop: valid.acc did not improve on 0.5") == 0);
    nitro::run_control missing({.early_stop = {.patience = 1}}, {});
    missing.begin(info_for(1, 1), &p, 1);
    CHECK_THROWS_WITH_AS(missing.after_eval(1, 1, "valid", values({{"acc", 0.5}})),
                         doctest::Contains("E-METRIC-001: no metric called 'loss' (known: acc)"), nitro::error);
    nitro::run_control lenient({}, {});  // default monitor, no early stopping: a split without the loss is fine
    lenient.begin(info_for(1, 1), &p, 1);
    CHECK(lenient.after_eval(1, 1, "valid", values({{"acc", 0.5}})));
  }

  TEST_CASE("logged steps allocate nothing: the history reserves its rows for the horizon") {
    if (!NITRO_TEST_ALLOC_COUNTING) return;
    nitro::run_control rc({.ema = {.decay = 0.9}, .log_every_n_steps = 2}, nitro::loggers(nitro::no_loggers));
    auto eta = rc.schedules().declare("eta");
    auto norm = rc.extras().declare("grad_norm");
    std::vector<float> p(64, 1.0f);
    rc.begin(info_for(100, 3), p.data(), 64);
    rc.after_step(1, 1, 1, 1.0, p.data(), 8);
    rc.after_step(2, 1, 2, 1.0, p.data(), 8);  // the first logged row
    rc.after_eval(2, 1, "valid", values({{"acc", 0.5}, {"loss", 0.7}}));  // evaluations reserve again afterwards
    long n;
    {
      counting c;
      for (int s = 3; s <= 300; ++s) {
        rc.schedules().set(eta, 0.01 * s);
        rc.extras().set(norm, 2.0 * s);
        rc.after_step(s, 1 + (s - 1) / 100, 1 + (s - 1) % 100, 1.0 / s, p.data(), 8);
      }
      n = c.count();
    }
    CHECK(n == 0);
    CHECK(rc.history().size() == 151);
    CHECK(rc.history().columns() == std::vector<std::string>{"loss", "eta", "grad_norm", "acc"});
    CHECK(rc.history().series("train", "grad_norm").back().second == 600.0);  // extras are logged whatever autolog says
    rc.request_stop("asked");
    CHECK(rc.should_stop());
    rc.end();
    CHECK(rc.status() == nitro::run_status::stopped);
    CHECK(rc.reason() == "asked");
  }

  TEST_CASE("progress reaches every logger each step; the ETA follows the rate") {
    struct progress_logger : nitro::run_logger {
      std::shared_ptr<std::vector<nitro::step_progress>> seen = std::make_shared<std::vector<nitro::step_progress>>();
      void on_batch(nitro::step_progress const& p) override { seen->push_back(p); }
    };
    progress_logger pl;
    nitro::run_control rc({}, nitro::loggers(pl));
    float p = 0;
    rc.begin(info_for(4, 2), &p, 1);
    for (int s = 1; s <= 4; ++s) rc.after_step(s, 1, s, 1.0 / s, &p, 16);
    REQUIRE(pl.seen->size() == 4);
    auto const& last = pl.seen->back();
    CHECK(last.step == 4);
    CHECK(last.total_steps == 8);
    CHECK(last.batch == 4);
    CHECK(last.loss == 0.25);
    CHECK(last.eta_seconds == doctest::Approx(last.elapsed_seconds).epsilon(1e-9));  // half done
  }
}

// =====================================================================================================
TEST_SUITE("loggers") {
  TEST_CASE("console: plain lines when the stream is not a terminal") {
    std::FILE* f = std::tmpfile();
    nitro::console_logger c({.stream = f});
    nitro::run_control rc({.log_every_n_steps = 2}, nitro::loggers(c));
    rc.schedules().declare("eta");
    float p = 0;
    rc.begin(info_for(2, 2), &p, 1);
    rc.schedules().set(std::size_t{0}, 0.001);
    rc.after_step(1, 1, 1, 0.75, &p, 8);
    rc.after_step(2, 1, 2, 0.25, &p, 8);
    rc.after_eval(2, 1, "valid", values({{"acc", 0.8125}, {"loss", 0.5}}));
    rc.end();
    auto lines = lines_of(read_stream(f));
    std::fclose(f);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0] == "nitro: Exp<4>  4 steps (2 epochs of 2)  batch 8");
    CHECK(lines[1].find("step 2/4  epoch 1/2  loss 0.5  eta 0.001  ") == 0);
    CHECK(lines[1].find(" samples/s  ETA 0:00:00") != std::string::npos);
    CHECK(lines[2] == "step 2  epoch 1/2  valid  acc 0.8125  loss 0.5000");
    CHECK(lines[3].find("finished after 2 steps (0:00:00)") == 0);
    CHECK(lines[0].find('\r') == std::string::npos);
  }

  TEST_CASE("console: a progress bar redrawn in place on a terminal") {
    std::FILE* f = std::tmpfile();
    nitro::console_logger c({.stream = f, .mode = nitro::console_options::bar, .refresh_seconds = 0.0, .bar_width = 10});
    nitro::run_control rc({.log_every_n_steps = 1}, nitro::loggers(c));
    float p = 0;
    rc.begin(info_for(4, 1), &p, 1);
    for (int s = 1; s <= 2; ++s) rc.after_step(s, 1, s, 0.5, &p, 8);
    rc.end();
    std::string out = read_stream(f);
    std::fclose(f);
    CHECK(out.find("\r\033[2Kepoch 1/1 [#####-----] 2/4  step 2/4  loss 0.5000") != std::string::npos);
    CHECK(out.find("step 1/4  epoch") == std::string::npos);  // no plain step lines under a bar
    CHECK(out.find("finished after 2 steps") != std::string::npos);
  }

  TEST_CASE("JSONL: the first line is metadata with the caller's selection; one object per record") {
    auto dir = tmp_dir("trainer/jsonl");
    auto info = info_for(2, 1);
    info.dir = dir;
    info.metadata_json = R"({"selection": {"variant": "small", "set": {"lr": 0.002}}, "seed": 3, "type": "ignored"})";
    nitro::jsonl_logger j;
    nitro::run_control rc({.log_every_n_steps = 1}, nitro::loggers(j));
    float p = 0;
    rc.begin(info, &p, 1);
    rc.after_step(1, 1, 1, 0.1, &p, 8);
    rc.after_step(2, 1, 2, std::nan(""), &p, 8);
    rc.end();
    auto lines = lines_of(nitro_test::slurp(dir / "metrics.jsonl"));
    REQUIRE(lines.size() == 4);
    auto meta = nlohmann::json::parse(lines[0]);
    CHECK(meta["type"] == "metadata");
    CHECK(meta["format"] == "nitro.metrics.v1");
    CHECK(meta["selection"]["set"]["lr"] == 0.002);
    CHECK(meta["seed"] == 3);
    CHECK(meta["experiment"] == "Exp<4>");
    CHECK(meta["resumed"] == false);
    auto s1 = nlohmann::json::parse(lines[1]);
    CHECK(s1["type"] == "metrics");
    CHECK(s1["split"] == "train");
    CHECK(s1["step"] == 1);
    CHECK(s1["loss"] == 0.1);  // exact: the shortest text that reads back
    CHECK(nlohmann::json::parse(lines[2])["loss"].is_null());  // NaN
    auto end = nlohmann::json::parse(lines[3]);
    CHECK(end["status"] == "diverged");
    CHECK(end["reason"] == "the loss is NaN at step 2");
    // a resumed run appends, starting with metadata again
    nitro::jsonl_logger again;
    again.on_setup(info);
    again.on_end(nitro::run_status::finished, "");
    auto more = lines_of(nitro_test::slurp(dir / "metrics.jsonl"));
    CHECK(more.size() == 6);
    CHECK(nlohmann::json::parse(more[4])["resumed"] == true);
  }

  TEST_CASE("JSONL: metadata that is not a JSON object, and a metric named like a column, are coded errors") {
    auto dir = tmp_dir("trainer/jsonl_bad");
    auto info = info_for(1, 1);
    info.dir = dir;
    info.metadata_json = "[1, 2]";
    nitro::jsonl_logger j;
    CHECK_THROWS_WITH_AS(j.on_setup(info), doctest::Contains("E-LOG-004"), nitro::error);
    info.metadata_json = "{";
    CHECK_THROWS_WITH_AS(j.on_setup(info), doctest::Contains("E-LOG-004"), nitro::error);
    info.metadata_json = "{}";
    j.on_setup(info);
    CHECK_THROWS_WITH_AS(j.on_eval(1, 1, "valid", values({{"step", 1.0}})), doctest::Contains("E-LOG-005"), nitro::error);
  }

  TEST_CASE("CSV: the history table; a new column rewrites the file atomically, other rows append") {
    auto dir = tmp_dir("trainer/csv");
    auto info = info_for(2, 2);
    info.dir = dir;
    nitro::csv_logger c;
    auto shared = std::make_shared<nitro::csv_logger>(c);
    nitro::run_control rc({.log_every_n_steps = 2}, nitro::loggers(shared));
    float p = 0;
    rc.begin(info, &p, 1);
    rc.after_step(1, 1, 1, 0.5, &p, 8);
    rc.after_step(2, 1, 2, 0.25, &p, 8);
    rc.after_eval(2, 1, "valid", values({{"acc", 0.75}, {"loss", 0.3}}));
    rc.after_step(3, 2, 1, 0.125, &p, 8);
    rc.after_step(4, 2, 2, 0.125, &p, 8);
    rc.after_eval(4, 2, "valid", values({{"acc", 0.8}, {"loss", 0.2}}));
    rc.end();
    const std::string csv = nitro_test::slurp(dir / "metrics.csv");
    CHECK(csv ==
          "step,epoch,split,loss,acc\n"
          "2,1,train,0.375,\n"
          "2,1,valid,0.3,0.75\n"
          "4,2,train,0.125,\n"
          "4,2,valid,0.2,0.8\n");
    CHECK(shared->rewrites() == 2);  // the first row, then the first row with acc
    CHECK(csv == rc.history().to_csv());
    // a crash's cut-short last line is dropped when a resumed run reopens the table
    {
      std::ofstream out(dir / "metrics.csv", std::ios::app);
      out << "6,3,tra";
    }
    nitro::csv_logger resumed;
    resumed.on_setup(info);
    resumed.on_step(6, 3, std::vector<nitro::scalar>{{"loss", 0.0625}});
    CHECK(nitro_test::slurp(dir / "metrics.csv") == csv + "6,3,train,0.0625,\n");
  }

  TEST_CASE("CSV: a file that is not a metrics table is not overwritten silently") {
    auto dir = tmp_dir("trainer/csv_bad");
    { std::ofstream(dir / "metrics.csv") << "a,b,c\n1,2,3\n"; }
    auto info = info_for(1, 1);
    info.dir = dir;
    nitro::csv_logger c;
    CHECK_THROWS_WITH_AS(c.on_setup(info), doctest::Contains("E-LOG-006"), nitro::error);
    CHECK(nitro_test::slurp(dir / "metrics.csv") == "a,b,c\n1,2,3\n");
  }

  TEST_CASE("TensorBoard: CRC32C of the standard check string, and records that frame and verify") {
    CHECK(nitro::detail::crc32c("123456789", 9) == 0xE3069283u);
    CHECK(nitro::detail::crc32c("", 0) == 0u);
    auto dir = tmp_dir("trainer/tb");
    auto info = info_for(1, 1, "the binding report");
    info.dir = dir;
    auto tb = std::make_shared<nitro::tensorboard_logger>();
    nitro::run_control rc({.log_every_n_steps = 1}, nitro::loggers(tb));
    float p = 0;
    rc.begin(info, &p, 1);
    rc.after_step(1, 1, 1, 0.5, &p, 8);
    rc.after_eval(1, 1, "valid", values({{"acc", 0.25}}));
    rc.end();
    const fs::path file = tb->path();
    CHECK(file.parent_path() == dir);
    CHECK(file.filename().string().rfind("events.out.tfevents.", 0) == 0);
    const std::string bytes = nitro_test::slurp(file);
    std::size_t at = 0;
    int records = 0;
    std::vector<std::string> payloads;
    while (at < bytes.size()) {
      REQUIRE(at + 12 <= bytes.size());
      std::uint64_t len = 0;
      for (int i = 0; i < 8; ++i) len |= std::uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
      std::uint32_t crc_len = 0, crc_data = 0;
      for (int i = 0; i < 4; ++i) crc_len |= std::uint32_t(static_cast<unsigned char>(bytes[at + 8 + i])) << (8 * i);
      CHECK(crc_len == nitro::detail::masked_crc32c(bytes.data() + at, 8));
      REQUIRE(at + 12 + len + 4 <= bytes.size());
      for (int i = 0; i < 4; ++i) crc_data |= std::uint32_t(static_cast<unsigned char>(bytes[at + 12 + len + i])) << (8 * i);
      CHECK(crc_data == nitro::detail::masked_crc32c(bytes.data() + at + 12, len));
      payloads.push_back(bytes.substr(at + 12, len));
      at += 12 + len + 4;
      ++records;
    }
    CHECK(records == 5);  // file_version, binding report, a step, an evaluation, the status
    CHECK(payloads[0].find("brain.Event:2") != std::string::npos);
    CHECK(payloads[1].find("the binding report") != std::string::npos);
    CHECK(payloads[2].find("train/loss") != std::string::npos);
    CHECK(payloads[3].find("valid/acc") != std::string::npos);
    CHECK(payloads[4].find("finished") != std::string::npos);
  }

  TEST_CASE("the default loggers: the console, plus the run's files when it has a directory") {
    auto info = info_for(1, 1);
    auto none = nitro::with_default_loggers(nitro::to_logger_set(nitro::default_loggers), info);
    CHECK(none.describe() == "console");
    info.dir = "/nonexistent-but-not-opened";
    auto all = nitro::with_default_loggers(nitro::loggers(nitro::default_loggers, recording_logger{}), info);
    CHECK(all.describe() == "console, jsonl(metrics.jsonl), csv(metrics.csv), tensorboard, recording");
    auto mine = nitro::with_default_loggers(nitro::loggers(recording_logger{}), info);
    CHECK(mine.describe() == "recording");
  }

  TEST_CASE("the built-in loggers write a logged step without allocating") {
    if (!NITRO_TEST_ALLOC_COUNTING) return;
    auto dir = tmp_dir("trainer/alloc");
    auto info = info_for(1000, 1);
    info.dir = dir;
    std::FILE* f = std::tmpfile();
    info.log_every_n_steps = 1;
    auto s = nitro::loggers(nitro::console_logger({.stream = f}), nitro::jsonl_logger(), nitro::csv_logger(), nitro::tensorboard_logger());
    s.on_setup(info);
    std::vector<nitro::scalar> row = {{"loss", 0.5}, {"eta", 0.001}, {"smoothing", 0.05}};
    s.on_step(1, 1, row);
    s.on_eval(1, 1, "valid", values({{"acc", 0.5}}));  // a new column: the CSV is rewritten (outside a step)
    long n;
    {
      counting c;
      for (int i = 2; i < 40; ++i) {
        row[0].value = 1.0 / i;
        s.on_step(i, 1, row);
      }
      n = c.count();
    }
    CHECK(n == 0);
    s.on_end(nitro::run_status::finished, "");
    std::fclose(f);
  }
}

// =====================================================================================================
TEST_SUITE("history and show") {
  TEST_CASE("history: a table of step, epoch, split and each metric; printable and exported to CSV") {
    nitro::run_history h;
    h.add(100, 1, "train", std::vector<nitro::scalar>{{"loss", 0.61234}, {"eta", 0.001}});
    h.add(429, 1, "valid", values({{"acc", 0.8412}, {"loss", 0.45211}}));
    h.add(500, 2, "train", std::vector<nitro::scalar>{{"loss", std::nan("")}, {"eta", 0.0005}});
    CHECK(h.to_text() ==
          "step  epoch  split    loss     eta     acc\n"
          " 100      1  train  0.6123   0.001\n"
          " 429      1  valid  0.4521          0.8412\n"
          " 500      2  train     nan  0.0005\n");
    CHECK(h.to_csv() ==
          "step,epoch,split,loss,eta,acc\n"
          "100,1,train,0.61234,0.001,\n"
          "429,1,valid,0.45211,,0.8412\n"
          "500,2,train,nan,0.0005,\n");
    auto acc = h.series("valid", "acc");
    REQUIRE(acc.size() == 1);
    CHECK(acc[0] == std::pair<std::int64_t, double>{429, 0.8412});
    CHECK(h.series("train", "loss").size() == 2);  // a reported NaN is a value
    CHECK(std::isnan(h.value(1, "eta")));
    auto back = nitro::run_history::from_csv(h.to_csv());
    CHECK(back.to_csv() == h.to_csv());
    auto dir = tmp_dir("trainer/history");
    h.write_csv(dir / "h.csv");
    CHECK(nitro_test::slurp(dir / "h.csv") == h.to_csv());
    CHECK_THROWS_WITH_AS(h.add(1, 1, "valid", values({{"epoch", 1.0}})), doctest::Contains("E-LOG-005"), nitro::error);
  }

}

// =====================================================================================================
namespace trainer_test {
template <int W>
struct Compiled {
  nitro::GraphConst<int, W> width;
  nitro::Device<float> smoothing{0.1f};
  float lr = 1e-3f;
};
NITRO_EXPERIMENT(Compiled, width, smoothing, lr);
// compiled in, never entered: its registration runs before main all the same
[[maybe_unused]] bool never_called() { return nitro::enter_program<Compiled<8>>(); }
}  // namespace trainer_test

TEST_SUITE("cache_stats") {
  TEST_CASE("programs compiled in are registered before main; entering one twice enters one program") {
    auto before = nitro::cache_stats();
    bool found8 = false;
    for (auto const& c : before.compiled)
      if (c.key == "trainer_test::Compiled<8>") {
        found8 = true;
        CHECK(c.graph_consts == "width=8");
      }
    CHECK(found8);
    CHECK(before.entries_of("trainer_test::Compiled<8>") == 0);
    CHECK(nitro::enter_program<Compiled<16>>());        // the first handle of Compiled<16>: a new program
    CHECK_FALSE(nitro::enter_program<Compiled<16>>());  // another one (a Device value changed): none
    auto after = nitro::cache_stats();
    CHECK(after.entries_of("trainer_test::Compiled<16>") == 2);
    CHECK(after.compiled.size() == before.compiled.size());  // nothing is compiled at run time
    CHECK(after.to_text().find("trainer_test::Compiled<16>  2 handles") != std::string::npos);
  }

  TEST_CASE("run-time caches count hits and misses") {
    auto& c = nitro::runtime_cache("test.cache");
    c.miss();
    c.hit();
    c.hit();
    auto line = nitro::cache_stats().cache("test.cache");
    CHECK(line.hits == 2);
    CHECK(line.misses == 1);
    CHECK(&nitro::runtime_cache("test.cache") == &c);
  }

  TEST_CASE("show's helpers read the experiment: fields with their residency and value") {
    Compiled<32> e;
    e.smoothing = 0.25f;
    auto f = nitro::describe_fields(e);
    REQUIRE(f.size() == 3);
    CHECK(f[0].name == "width");
    CHECK(f[0].residency == "GraphConst");
    CHECK(f[0].value == "32");
    CHECK(f[1].value == "0.25");
    CHECK(f[2].residency == "Host");
    CHECK(f[2].value == "0.001");
  }
}

// ---- :concat through the handle's own evaluation ------------------------------------------------------
namespace concat_test {
struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct In { BOOST_HANA_DEFINE_STRUCT(In, (nitro::Tensor, x)); };
struct Target { BOOST_HANA_DEFINE_STRUCT(Target, (nitro::Tensor, y)); };
struct Cat { BOOST_HANA_DEFINE_STRUCT(Cat, (nitro::concat_of<nitro::Tensor>, yhat), (nitro::concat_of<nitro::Tensor>, y)); };
struct Exp {
  std::int64_t batch_size = 3;  // 10 samples: batches of 3, 3, 3 and 1
  auto build_data() const {
    nitro::Tensor x = nitro::Tensor::owned({2, 10}), y = nitro::Tensor::owned({1, 10});
    for (int i = 0; i < 10; ++i) { x(0, i) = float(i); x(1, i) = float(i % 3); y(0, i) = float(100 + i); }
    return nitro::data::dataset<Batch>{"ten", {{"train", Batch{x, y}}, {"valid", Batch{x, y}}}, "concat"};
  }
  auto build_model() const { return nitro::nn::dense<2, 1>(); }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const { return m(in.x, ps, st); }
  auto loss(nitro::Tensor const& yhat, Target const& t) const { return nitro::nn::mse(yhat, t.y); }
  auto metrics(nitro::Tensor const& yhat, Target const& t) const { return Cat{{yhat}, {t.y}}; }
};
NITRO_EXPERIMENT(Exp, batch_size);
}  // namespace concat_test

// ---- show() on a real handle: a wrapped rule and a chain, the field each value lands in -------------
namespace show_test {
struct Exp : concat_test::Exp {
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<2, 4>(nitro::nn::tanh), nitro::nn::dense<4, 1>()); }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate() const { return 0.01; }
  double learning_rate(nitro::group<"head">) const { return 0.005; }
  auto optimizer(nitro::group<"encoder">) const { return nitro::optim::sam(nitro::optim::adamw()); }
  auto optimizer(nitro::group<"head">) const { return nitro::optim::chain(nitro::optim::sgd({.momentum = 0.5}), nitro::optim::sgd({.momentum = 0.7})); }
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::cosine(0.01), nitro::key<"beta1"> = 0.85,
                               nitro::key<"opt.head.chain.2.momentum"> = 0.3};
  }
};
NITRO_EXPERIMENT(Exp, batch_size);
}  // namespace show_test

TEST_CASE("show() on a real handle: groups, rules, and each scheduled value's field by its path in the rule") {
  nitro::Nitro h(show_test::Exp{}, nitro::logger = nitro::no_loggers);
  const std::string text = nitro::show_text(h.description());
  const auto from = text.find("\nbindings\n");
  REQUIRE(from != std::string::npos);
  CHECK(text.substr(text.find("\n  gradient_clip_norm", from) + 1) ==
        "  gradient_clip_norm  none\n"
        "  schedules\n"
        "    key                        source    binds to                                curve\n"
        "    eta                        accessor  opt: encoder.eta (x1), head.eta (x0.5)  cosine(0.01 -> 0)\n"
        "    beta1                      accessor  opt: encoder.sam.adamw.beta1            0.85\n"
        "    opt.head.chain.2.momentum  accessor  opt, path-bound: head.chain.2.momentum  0.3\n"
        "  parameter groups\n"
        "    group    params   rate  ratio  anchor  decay  rule\n"
        "    encoder      12   0.01      1  zero     0.01  sam(adamw(beta1=0.85, beta2=0.999, eps=1e-08), rho=0.05)\n"
        "    head          5  0.005    0.5  zero        0  chain(sgd(momentum=0.5, dampening=0), sgd(momentum=0.3, dampening=0))\n"
        "  optimizer  encoder: sam(adamw(beta1=0.85, beta2=0.999, eps=1e-08), rho=0.05); head: chain(sgd(momentum=0.5, dampening=0), sgd(momentum=0.3, dampening=0))\n"
        "    scheduled value            group    lands in\n"
        "    eta                        encoder  eta\n"
        "    eta                        head     eta\n"
        "    beta1                      encoder  sam.adamw.beta1\n"
        "    opt.head.chain.2.momentum  head     chain.2.momentum\n");
  // the report a run writes is this text (test_trainer_e2e), and the landings are the optimizer's own
  CHECK(h.optimizer().field("head", "chain.2.momentum") == doctest::Approx(0.3));
  CHECK(h.optimizer().field("head", "chain.1.momentum") == doctest::Approx(0.5));
}

TEST_CASE(":concat through evaluate(): every sample of the split once, in order, the partial last batch included") {
  nitro::Nitro h(concat_test::Exp{}, nitro::logger = nitro::no_loggers);
  const nitro::metric_values m = h.evaluate("valid");
  REQUIRE(m.has_tensor("y"));
  REQUIRE(m.has_tensor("yhat"));
  CHECK(m.tensor("y").shape() == nitro::shape{1, 10});
  std::vector<float> labels;
  for (int i = 0; i < 10; ++i) labels.push_back(float(100 + i));
  CHECK(m.tensor("y").to_vector() == labels);
  // the predictions are forward's on the whole split, column for column
  const nitro::Tensor whole = h.predict(h.data().split("valid").all());
  REQUIRE(m.tensor("yhat").shape() == whole.shape());
  for (int i = 0; i < 10; ++i) CHECK(m.tensor("yhat")[i] == doctest::Approx(whole[i]).epsilon(1e-6));
}
