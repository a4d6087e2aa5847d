// knobs/: declarations read by the compiler, the catalog, the selection (--set over --variant over
// the default, every source recorded), sweeps (last axis fastest), slugs, and records written
// atomically. Every run-time E-KNOB code is asserted with its exact text.
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/catalog.hpp>
#include <nitro/knobs/declarations.hpp>
#include <nitro/knobs/records.hpp>
#include <nitro/knobs/selection.hpp>
#include <nitro/knobs/slug.hpp>
#include <nitro/knobs/sweep_points.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <array>
#include <filesystem>
#include <string>
#include <vector>
#include "../support/nitro_test.hpp"

namespace knobs_test {

template <int Width = 128>
struct Exp {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  float lr = 1.5e-3f;
  int layers = 4;
  std::string optimizer = "adamw";
  bool warmup = true;
  std::uint32_t seq = 1024;
  double wd = 0.01;

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak learning rate"), nitro::knob<"layers">("transformer blocks"),
                        nitro::knob<"width">("model width"), nitro::knob<"optimizer">(), nitro::knob<"smoothing">(),
                        nitro::knob<"warmup">(), nitro::knob<"seq">("sequence length"), nitro::knob<"wd">(),
                        nitro::knob<"max_epochs">("epochs"));
  }
  static constexpr auto variants() {
    return nitro::variants(
        nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"width">(64)),
        nitro::variant<"smoke">(nitro::set<"layers">(2), nitro::set<"width">(64), nitro::set<"seq">(64)),
        // variants made by code: one per depth
        nitro::generate<1, 8>([]<int L>() { return nitro::variant<nitro::numbered<"depth", L>()>(nitro::set<"layers">(L)); }));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)),
                         nitro::sweep<"deep-lr">(nitro::base<"small">, nitro::axis<"lr">(0.002, 0.004), nitro::axis<"optimizer">("adamw", "sgd")),
                         nitro::sweep<"widths">(nitro::axis<"width">(128, 64)),
                         nitro::sweep<"smooth">(nitro::axis<"smoothing">(0.0, 0.1)));
  }
};
NITRO_EXPERIMENT(Exp, width, smoothing, lr, layers, optimizer, warmup, seq, wd);

// Declares its own seed knob as a field, and no variants or sweeps.
struct Seeded {
  std::uint64_t seed = 42;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"seed">("my seed")); }
};
NITRO_EXPERIMENT(Seeded, seed);

// Declares nothing at all: seed is still a knob.
struct Bare {
  float lr = 0.1f;
};
NITRO_EXPERIMENT(Bare, lr);

// The data a hook builds sees the selected value (a member initialiser would see the default).
struct WithData {
  int train_limit = 100;
  static constexpr auto knobs() { return nitro::knobs(nitro::knob<"train_limit">()); }
  int build_data() const { return train_limit * 2; }
};
NITRO_EXPERIMENT(WithData, train_limit);

// An enum and lists as knobs (the note's "(optimizer :adamw) ; any ordinary value").
enum class opt_kind { adamw, sgd, lion };
NITRO_KNOB_ENUM(opt_kind, adamw, sgd, lion)
enum class arch_kind : std::uint8_t { narrow, wide };
NITRO_KNOB_ENUM(arch_kind, narrow, wide)

template <arch_kind Arch = arch_kind::narrow>
struct Typed {
  nitro::GraphConst<arch_kind, Arch> arch;  // an enum GraphConst: one program per value
  opt_kind optimizer = opt_kind::adamw;
  std::vector<int> hidden{256, 128};
  std::array<float, 2> betas{0.9f, 0.999f};
  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"arch">(), nitro::knob<"optimizer">("update rule"), nitro::knob<"hidden">("hidden widths"),
                        nitro::knob<"betas">());
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"plain">(nitro::set<"optimizer">(opt_kind::sgd), nitro::set<"hidden">(std::array{64}),
                                                   nitro::set<"betas">(std::array{0.5, 0.75})),
                           nitro::variant<"big">(nitro::set<"arch">(arch_kind::wide)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"rules">(nitro::axis<"optimizer">(opt_kind::sgd, opt_kind::lion)),
                         nitro::sweep<"depths">(nitro::axis<"hidden">(std::array{32, 32}, std::array{32, 32, 32})));
  }
};
NITRO_EXPERIMENT(Typed, arch, optimizer, hidden, betas);

std::string error_text(auto&& f) {
  try {
    f();
  } catch (nitro::error const& e) {
    return e.what();
  }
  return "no error";
}

using nitro_test::tmp_dir;

}  // namespace knobs_test

using namespace knobs_test;
using E128 = Exp<128>;
using E64 = Exp<64>;

TEST_CASE("declarations are read and checked by the compiler; seed is a knob of every experiment") {
  static_assert(nitro::declarations<E128>::ok);
  static_assert(nitro::declarations<Seeded>::ok && nitro::declarations<Bare>::ok);
  static_assert(nitro::knob_traits<E128, "width">::is_graph_const);
  static_assert(nitro::knob_traits<E128, "max_epochs">::is_keyword);  // a run keyword, not a field
  static_assert(nitro::knob_traits<E128, "seed">::is_keyword);
  static_assert(nitro::knob_traits<Seeded, "seed">::is_field);
  static_assert(!nitro::knob_traits<E128, "nope">::exists);
  static_assert(std::tuple_size_v<nitro::declarations<E128>::knob_tuple> == 10);  // nine declared + seed
  static_assert(std::tuple_size_v<nitro::declarations<Seeded>::knob_tuple> == 1);
  static_assert(nitro::numbered<"depth", 12>().view() == "depth12");
}

TEST_CASE("the catalog: defaults from a default experiment, docs, kinds, programs and compiled values") {
  auto c = nitro::make_catalog<E128, E64>();
  CHECK(c.experiment == "Exp");
  REQUIRE(c.knobs.size() == 10);
  CHECK(c.knobs[0].name == "lr");
  CHECK(c.knobs[0].default_value.str() == "0.0015");  // the float, printed as the shortest text that reads back
  CHECK(c.knobs[0].doc == "peak learning rate");
  CHECK(c.knobs[0].kind == nitro::knob_kind::real32);
  CHECK(c.find_knob("width")->graph_const);
  CHECK(c.find_knob("width")->accepted() == "128, 64");
  CHECK(c.find_knob("max_epochs")->default_value.str() == "1");  // the framework's value: no field, no accessor
  CHECK(c.find_knob("seed")->implicit);
  CHECK(c.find_knob("seed")->default_value.str() == "1");
  // a run keyword's knob says its doc once: the keyword table's, unless the knob gives its own
  CHECK(c.find_knob("seed")->doc == "the run seed; every random stream folds it in");
  CHECK(c.find_knob("seed")->doc == nitro::run_keyword_doc("seed"));
  CHECK(c.find_knob("max_epochs")->doc == "epochs");
  CHECK(c.find_knob("width")->doc == "model width");
  CHECK(c.find_knob("seq")->kind == nitro::knob_kind::unsigned_integer);
  CHECK(c.programs == std::vector<std::string>{"Exp<width=128>", "Exp<width=64>"});
  REQUIRE(c.variants.size() == 4);
  CHECK(c.variants[2].name == "depth1");
  CHECK(c.variants[3].name == "depth8");
  CHECK(c.variants[3].sets[0].second.str() == "8");
  CHECK(c.find_sweep("deep-lr")->base == "small");
  CHECK(c.find_sweep("deep-lr")->points() == 4);

  auto s = nitro::make_catalog<Seeded>();
  REQUIRE(s.knobs.size() == 1);
  CHECK(s.knobs[0].default_value.str() == "42");
  CHECK(!s.knobs[0].implicit);
  CHECK(s.knobs[0].is_field);
}

TEST_CASE("--set wins over --variant, which wins over the default; every source is recorded") {
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request r;
  r.variant = "small";
  r.sets = {{"lr", "0.002"}, {"layers", "3"}, {"seed", "7"}};
  auto s = nitro::resolve_selection(c, r);
  CHECK(s.at(c, "lr").value.str() == "0.002");
  CHECK(s.at(c, "lr").source == nitro::knob_source::set);
  CHECK(s.at(c, "layers").value.str() == "3");  // set over variant
  CHECK(s.at(c, "layers").source == nitro::knob_source::set);
  CHECK(s.at(c, "width").value.str() == "64");
  CHECK(s.at(c, "width").source == nitro::knob_source::variant);
  CHECK(s.at(c, "optimizer").source == nitro::knob_source::fallback);
  CHECK(s.seed(c) == 7);
  CHECK(s.program == 1);  // width 64 is the second program

  E64 e;
  nitro::apply_selection(e, c, s);
  CHECK(e.lr == 0.002f);
  CHECK(e.layers == 3);
  CHECK(e.smoothing.get() == 0.05f);
  // max_epochs and seed reach the handle as keywords: seed was set; max_epochs was not, so it passes
  // nothing and the handle resolves it itself (its records then say `default`, not `keyword`)
  auto kws = nitro::selection_keywords<E64>(s);
  CHECK(!std::get<0>(kws).value.has_value());
  CHECK(std::get<1>(kws).value == 7u);
  const nitro::run_keywords kw(e, std::get<0>(kws), std::get<1>(kws));  // as the handle resolves them
  CHECK(kw.max_epochs.value == 1);
  CHECK(kw.max_epochs.source == nitro::keyword_source::fallback);
  CHECK(kw.seed.value == 7u);
  CHECK(kw.seed.source == nitro::keyword_source::keyword);

  auto j = nitro::knobs_json(c, s);
  CHECK(j["layers"]["source"] == "set");
  CHECK(j["width"]["source"] == "variant");
  CHECK(j["lr"]["value"] == 0.002);
  CHECK(j["lr"]["doc"] == "peak learning rate");
  auto o = nitro::overrides_json([] { nitro::selection_request q; q.steps = 100; q.diagnostics = true; return q; }());
  CHECK(o["steps"]["source"] == "override");
  CHECK(o["diagnostics"]["value"] == true);
}

TEST_CASE("the selection is applied before a hook reads a knob") {
  auto c = nitro::make_catalog<WithData>();
  nitro::selection_request r;
  r.sets = {{"train_limit", "7"}};
  WithData e{};
  nitro::apply_selection(e, c, nitro::resolve_selection(c, r));
  CHECK(e.build_data() == 14);
}

TEST_CASE("--set seed=N works in an experiment that declares nothing") {
  auto c = nitro::make_catalog<Bare>();
  nitro::selection_request r;
  r.sets = {{"seed", "5"}};
  auto s = nitro::resolve_selection(c, r);
  CHECK(s.seed(c) == 5);
  CHECK(std::get<0>(nitro::selection_keywords<Bare>(s)).value == 5u);
  CHECK(error_text([&] { r.sets = {{"lr", "1"}}; nitro::resolve_selection(c, r); }) ==
        "E-KNOB-005: --set names 'lr', which the experiment does not declare\n  fix: set one of its knobs: seed (see `variants`)");
  CHECK(error_text([&] { r.sets = {}; r.variant = "x"; nitro::resolve_selection(c, r); }) ==
        "E-KNOB-004: --variant names 'x', which the experiment does not declare\n"
        "  fix: the experiment declares no variants; add `static constexpr auto variants()` to it");
}

TEST_CASE("E-KNOB-004 and E-KNOB-005 name the mistake and suggest the nearest declared name") {
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request r;
  r.sets = {{"lrr", "0.1"}};
  CHECK(error_text([&] { nitro::resolve_selection(c, r); }) ==
        "E-KNOB-005: --set names 'lrr', which the experiment does not declare; did you mean 'lr'?\n"
        "  fix: set one of its knobs: lr, layers, width, optimizer, smoothing, warmup, seq, wd, max_epochs, seed (see `variants`)");
  r.sets = {{"zzzzzz", "1"}};
  CHECK(error_text([&] { nitro::resolve_selection(c, r); }).rfind("E-KNOB-005: --set names 'zzzzzz', which the experiment does not declare\n", 0) == 0);
  r.sets = {};
  r.variant = "smal";
  CHECK(error_text([&] { nitro::resolve_selection(c, r); }) ==
        "E-KNOB-004: --variant names 'smal', which the experiment does not declare; did you mean 'small'?\n"
        "  fix: name one of its variants: small, smoke, depth1, depth8 (see `variants`)");
}

TEST_CASE("E-KNOB-010: a value that does not parse as the knob's type names what it accepts") {
  auto c = nitro::make_catalog<E128, E64>();
  auto fails = [&](std::string k, std::string v) {
    nitro::selection_request r;
    r.sets = {{k, v}};
    return error_text([&] { nitro::resolve_selection(c, r); });
  };
  CHECK(fails("lr", "fast") ==
        "E-KNOB-010: --set gives the knob 'lr' the value 'fast', which is not a valid float\n"
        "  fix: give a finite decimal number that fits a float, such as 0.002 or 1e-3, e.g. --set lr=0.5");
  CHECK(fails("layers", "2.5") ==
        "E-KNOB-010: --set gives the knob 'layers' the value '2.5', which is not a valid integer\n"
        "  fix: give a whole number from -2147483648 to 2147483647, e.g. --set layers=1");
  CHECK(fails("layers", "99999999999").rfind("E-KNOB-010", 0) == 0);
  CHECK(fails("seq", "-1").rfind("E-KNOB-010: --set gives the knob 'seq' the value '-1', which is not a valid unsigned integer", 0) == 0);
  CHECK(fails("warmup", "yes") ==
        "E-KNOB-010: --set gives the knob 'warmup' the value 'yes', which is not a valid bool\n"
        "  fix: give true or false (also 1 or 0), e.g. --set warmup=true");
  CHECK(fails("lr", "nan").rfind("E-KNOB-010", 0) == 0);
  CHECK(fails("lr", "1e39").rfind("E-KNOB-010", 0) == 0);  // beyond a float
  CHECK(fails("wd", "1e39") == "no error");                // a double holds it
  CHECK(fails("seed", "").rfind("E-KNOB-010", 0) == 0);
  CHECK(fails("optimizer", "") == "no error");  // text takes anything
}

TEST_CASE("enum knobs print and parse by name; list knobs as [a,b]; variants, sweeps and programs use them") {
  using T0 = Typed<arch_kind::narrow>;
  using T1 = Typed<arch_kind::wide>;
  static_assert(nitro::declarations<T0>::ok);
  static_assert(nitro::is_knob_type_v<opt_kind> && nitro::is_knob_type_v<std::vector<double>> &&
                nitro::is_knob_type_v<std::array<std::int64_t, 3>>);
  static_assert(!nitro::is_knob_type_v<std::vector<bool>> && !nitro::is_knob_type_v<std::vector<std::string>>);
  enum class undescribed { a };
  static_assert(!nitro::is_knob_type_v<undescribed>);  // no NITRO_KNOB_ENUM: E-KNOB-002 at compile time
  static_assert(nitro::symbol_name(opt_kind::lion) == "lion");

  auto c = nitro::make_catalog<T0, T1>();
  CHECK(c.programs == std::vector<std::string>{"Typed<arch=narrow>", "Typed<arch=wide>"});
  CHECK(c.find_knob("arch")->accepted() == "narrow, wide");
  auto const& opt = *c.find_knob("optimizer");
  CHECK(opt.kind == nitro::knob_kind::symbol);
  CHECK(opt.cxx_type == "enum");
  CHECK(opt.default_value.str() == "adamw");
  CHECK(opt.accepted() == "one of adamw, sgd, lion");
  CHECK(c.find_knob("hidden")->default_value.str() == "[256,128]");
  CHECK(c.find_knob("hidden")->cxx_type == "list<int>");
  CHECK(c.find_knob("betas")->default_value.str() == "[0.9,0.999]");  // floats, shortest
  CHECK(c.find_knob("betas")->cxx_type == "list<float, 2>");
  REQUIRE(c.variants.size() == 2);
  CHECK(c.variants[0].sets[0].second.str() == "sgd");
  CHECK(c.variants[0].sets[1].second.str() == "[64]");
  CHECK(c.variants[0].sets[2].second.str() == "[0.5,0.75]");
  CHECK(c.find_sweep("rules")->axes[0].values[1].str() == "lion");
  CHECK(c.find_sweep("depths")->axes[0].values[1].str() == "[32,32,32]");

  nitro::selection_request r;
  r.variant = "plain";
  r.sets = {{"optimizer", ":lion"}, {"betas", "0.8, 0.99"}, {"arch", "wide"}};
  auto s = nitro::resolve_selection(c, r);
  CHECK(s.program == 1);  // arch=wide is the second program
  CHECK(s.at(c, "optimizer").value.str() == "lion");
  CHECK(s.at(c, "hidden").source == nitro::knob_source::variant);
  T1 e;
  nitro::apply_selection(e, c, s);
  CHECK(e.optimizer == opt_kind::lion);
  CHECK(e.hidden == std::vector<int>{64});
  CHECK(e.betas == std::array<float, 2>{0.8f, 0.99f});
  auto j = nitro::knobs_json(c, s);
  CHECK(j["optimizer"]["value"] == "lion");
  CHECK(j["hidden"]["value"] == nlohmann::ordered_json::array({64}));
  CHECK(j["betas"]["value"] == nlohmann::ordered_json::array({0.8, 0.99}));  // as the float prints, not 0.800000011920929
  r.sets = {{"hidden", "[]"}};
  CHECK(nitro::resolve_selection(c, r).at(c, "hidden").value.str() == "[]");  // a vector may be empty

  auto fails = [&](std::string k, std::string v) {
    nitro::selection_request q;
    q.sets = {{k, v}};
    return error_text([&] { nitro::resolve_selection(c, q); });
  };
  CHECK(fails("optimizer", "adam") ==
        "E-KNOB-010: --set gives the knob 'optimizer' the value 'adam', which is not one of its values\n"
        "  fix: give one of adamw, sgd, lion, e.g. --set optimizer=lion");
  CHECK(fails("betas", "0.9") ==
        "E-KNOB-010: --set gives the knob 'betas' the value '0.9', which is not a valid list\n"
        "  fix: give a list of exactly 2 items written [a,b] or a,b, each item a finite decimal number that fits a float, such as "
        "0.002 or 1e-3, e.g. --set betas=[0.5,0.5]");
  CHECK(fails("hidden", "[64,,32]").rfind("E-KNOB-010", 0) == 0);
  CHECK(fails("hidden", "64;32").rfind("E-KNOB-010", 0) == 0);
  CHECK(fails("hidden", "[3000000000]").rfind("E-KNOB-010", 0) == 0);  // beyond an int
  CHECK(fails("arch", "tall") ==
        "E-KNOB-010: --set gives the knob 'arch' the value 'tall', which is not one of its values\n"
        "  fix: give one of narrow, wide, e.g. --set arch=wide");
  CHECK(fails("optimizer", "sgd") == "no error");
  CHECK(fails("hidden", " [ 8 , 4 ] ") == "E-KNOB-010: --set gives the knob 'hidden' the value ' [ 8 , 4 ] ', which is not a valid list\n"
        "  fix: give a list written [a,b] or a,b, each item a whole number from -2147483648 to 2147483647, e.g. --set hidden=[1,1]");
  CHECK(fails("hidden", "[ 8 , 4 ]") == "no error");
}

TEST_CASE("E-KNOB-011: a GraphConst value not compiled in names the compiled values and the fix") {
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request r;
  r.sets = {{"width", "512"}};
  CHECK(error_text([&] { nitro::resolve_selection(c, r); }) ==
        "E-KNOB-011: --set asks for width=512, but this binary was compiled for width = 128, 64 only (width is a GraphConst: each value "
        "is a program)\n  fix: choose one of 128, 64, or add the instantiation for width=512 to nitro::main<Exp<width=128>, "
        "Exp<width=64>, ...> and rebuild");
  auto one = nitro::make_catalog<E128>();  // a binary with one program: the small variant's width is not in it
  nitro::selection_request v;
  v.variant = "small";
  CHECK(error_text([&] { nitro::resolve_selection(one, v); }).rfind("E-KNOB-011: the variant 'small' asks for width=64", 0) == 0);
}

TEST_CASE("E-KNOB-013: a knob set twice") {
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request r;
  r.sets = {{"lr", "0.1"}, {"lr", "0.2"}};
  CHECK(error_text([&] { nitro::resolve_selection(c, r); }) ==
        "E-KNOB-013: --set gives the knob 'lr' twice\n  fix: keep one --set lr=... (or set it in one place)");
}

TEST_CASE("sweeps: the cross product, last axis fastest, on the base variant; conflicts are errors") {
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request extra;
  extra.sets = {{"wd", "0.1"}};
  auto p = nitro::sweep_points(c, "deep-lr", extra);
  REQUIRE(p.size() == 4);
  std::vector<std::string> got;
  for (auto const& q : p) got.push_back(nitro::slug_stem(c.experiment, q));
  CHECK(got == std::vector<std::string>{"exp-small-wd=0.1-lr=0.002-optimizer=adamw", "exp-small-wd=0.1-lr=0.002-optimizer=sgd",
                                        "exp-small-wd=0.1-lr=0.004-optimizer=adamw", "exp-small-wd=0.1-lr=0.004-optimizer=sgd"});
  auto w = nitro::sweep_points(c, "widths", {});
  CHECK(nitro::resolve_selection(c, w[0]).program == 0);
  CHECK(nitro::resolve_selection(c, w[1]).program == 1);
  // a sweep over a Device field stays in one program: the value is written into the field's slot
  auto sm = nitro::sweep_points(c, "smooth", {});
  auto s0 = nitro::resolve_selection(c, sm[0]), s1 = nitro::resolve_selection(c, sm[1]);
  CHECK(s0.program == s1.program);
  E128 e;
  nitro::apply_selection(e, c, s1);
  CHECK(e.smoothing.get() == doctest::Approx(0.1f));

  CHECK(error_text([&] { nitro::sweep_points(c, "seed", {}); }) ==
        "E-KNOB-012: `sweep` names 'seed', which the experiment does not declare; did you mean 'seeds'?\n"
        "  fix: name one of its sweeps: seeds, deep-lr, widths, smooth (see `variants`)");
  nitro::selection_request bad;
  bad.sets = {{"lr", "0.1"}};
  CHECK(error_text([&] { nitro::sweep_points(c, "deep-lr", bad); }) ==
        "E-KNOB-013: --set lr=0.1 contradicts the sweep 'deep-lr', whose axis sets lr\n"
        "  fix: drop --set lr, or run the one point with `run --set lr=0.1`");
  nitro::selection_request other;
  other.variant = "smoke";
  CHECK(error_text([&] { nitro::sweep_points(c, "deep-lr", other); }).rfind("E-KNOB-013: the sweep 'deep-lr' runs every point on the variant 'small'", 0) == 0);
  auto seeds = nitro::sweep_points(c, "seeds", other);  // no base: --variant applies to every point
  CHECK(seeds[2].variant == "smoke");
  CHECK(seeds[2].sets.back() == std::pair<std::string, std::string>{"seed", "3"});
}

TEST_CASE("slugs show the selection; snake case; unsafe characters replaced; long ones keep a hash") {
  CHECK(nitro::snake_case("FashionMLP") == "fashion_mlp");
  CHECK(nitro::snake_case("HTTPServer") == "http_server");
  CHECK(nitro::snake_case("fashion_mlp") == "fashion_mlp");
  nitro::selection_request r;
  r.variant = "small";
  r.sets = {{"lr", "0.002"}};
  CHECK(nitro::make_slug("FashionMLP", r, "abc") == "fashion_mlp-small-lr=0.002-abc");
  r.sets = {{"optimizer", "a b/c"}};
  CHECK(nitro::make_slug("FashionMLP", r, "x") == "fashion_mlp-small-optimizer=a_b_c-x");
  r.sets = {{"optimizer", std::string(200, 'a')}};
  auto long_slug = nitro::slug_stem("FashionMLP", r);
  CHECK(long_slug.size() == 119);
  r.sets = {{"optimizer", std::string(199, 'a') + "b"}};
  CHECK(nitro::slug_stem("FashionMLP", r) != long_slug);
  CHECK(nitro::make_run_id() != nitro::make_run_id());
}

TEST_CASE("a selection request round-trips through its JSON and its command-line arguments") {
  nitro::selection_request r;
  r.variant = "small";
  r.sets = {{"lr", "0.002"}, {"seed", "3"}};
  r.steps = 10;
  r.eval_every = 5;
  r.diagnostics = true;
  CHECK(nitro::selection_request::from_json(r.json()) == r);
  CHECK(r.to_args() == std::vector<std::string>{"--variant", "small", "--set", "lr=0.002", "--set", "seed=3", "--steps", "10",
                                                "--eval-every", "5", "--diagnostics"});
}

TEST_CASE("records: the folder is made once, status is replaced whole, metrics lines append; runs are found") {
  const std::string dir = tmp_dir("knobs/records");
  auto c = nitro::make_catalog<E128, E64>();
  nitro::selection_request r;
  r.variant = "small";
  auto s = nitro::resolve_selection(c, r);
  nitro::run_identity id;
  id.id = "t1";
  id.slug = nitro::make_slug(c.experiment, r, id.id);
  id.started = nitro::iso_time_now();
  auto rec = nitro::run_record::create(dir, id.slug);
  CHECK(error_text([&] { nitro::run_record::create(dir, id.slug); }).rfind("E-REC-001: the run folder " + rec.dir() + " exists already", 0) == 0);
  rec.write_manifest(nitro::manifest_json(c, s, id));
  rec.append_metrics(nitro::metrics_metadata_json(c, s, id));
  CHECK(nitro::metrics_metadata_json(c, s, id)["format"] == "nitro.metrics.v1");  // the format metrics.jsonl's logger writes
  rec.append_metrics({{"type", "train"}, {"step", 1}, {"loss", 2.0}});
  nitro::status_record st;
  st.slug = id.slug;
  st.selection = nitro::selection_json(c, s);
  rec.write_status(st.json());
  st.state = "finished";
  st.last["valid/acc"] = 0.5;
  rec.write_status(st.json());

  auto m = nitro::read_json(rec.path("manifest.json"));
  CHECK(m["slug"] == "exp-small-t1");
  CHECK(m["program"]["name"] == "Exp<width=64>");
  CHECK(m["knobs"]["width"]["source"] == "variant");
  CHECK(m["selection"]["variant"] == "small");
  CHECK(m["seed"] == 1);
  auto lines = nitro::read_jsonl(rec.path("metrics.jsonl"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["type"] == "metadata");
  CHECK(lines[0]["selection"]["knobs"]["layers"]["value"] == 2);
  auto status = nitro::read_json(rec.path("status.json"));
  CHECK(status["state"] == "finished");
  CHECK(status["selection"]["variant"] == "small");
  CHECK(status["last"]["valid/acc"] == 0.5);
  for (auto const& f : std::filesystem::directory_iterator(rec.dir())) CHECK(f.path().string().find(".tmp.") == std::string::npos);

  // a torn last line (a crash mid-write) is skipped, the lines before it kept
  nitro::append_record_line(rec.path("metrics.jsonl"), "{\"type\": \"train\", \"st");
  CHECK(nitro::read_jsonl(rec.path("metrics.jsonl")).size() == 2);

  CHECK(nitro::find_run(dir, "latest") == rec.dir());
  CHECK(nitro::find_run(dir, "exp-sm") == rec.dir());
  CHECK(nitro::latest_run_with(dir, "Exp", r) == rec.dir());
  CHECK(error_text([&] { nitro::find_run(dir, "exp-smal-t2"); }) ==
        "E-CLI-004: no run called 'exp-smal-t2' under " + dir + "; did you mean 'exp-small-t1'?\n"
        "  fix: give a run folder, a slug (or its unique start) under --run-dir, or `latest`");
  nitro::selection_request none;
  CHECK(error_text([&] { nitro::latest_run_with(dir, "Exp", none); }).rfind("E-CLI-004: no run under " + dir + " was made with the default selection", 0) == 0);
  nitro::write_record_atomic(rec.path("manifest.json"), "{ cut sh");
  CHECK(error_text([&] { nitro::read_json(rec.path("manifest.json")); }).rfind("E-REC-002: the record " + rec.path("manifest.json") + " is not valid JSON", 0) == 0);
}
