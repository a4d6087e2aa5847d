// core/: compile-time names, markers, experiment reflection, trees, the random stream, errors.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <boost/hana.hpp>

#include <set>
#include <string>

namespace hana = boost::hana;

namespace core_test {
template <int Width = 128>
struct Mlp {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  float lr = 1e-3f;
  std::string name = "mlp";
};
NITRO_EXPERIMENT(Mlp, width, smoothing, lr, name);

struct Plain {
  int a = 1;
  double b = 2;
};
NITRO_EXPERIMENT(Plain, b, a);  // any order
struct Unadapted { int a = 0; };
}  // namespace core_test

TEST_CASE("fixed_string: compile-time names join into keypaths") {
  constexpr nitro::fixed_string a = "layer_1";
  constexpr nitro::fixed_string b = "weight";
  static_assert(nitro::join(a, '.', b).view() == "layer_1.weight");
  static_assert(nitro::layer_name<1>().view() == "layer_1");
  static_assert(nitro::layer_name<12>().view() == "layer_12");
  CHECK(std::string(nitro::join(a, '.', b).c_str()) == "layer_1.weight");
}

TEST_CASE("GraphConst: the value is in the type and usable as a template argument") {
  core_test::Mlp<256> e;
  constexpr int w = decltype(e.width)::value;
  std::array<int, w> buffer{};  // a template argument
  CHECK(buffer.size() == 256);
  static_assert(nitro::is_graph_const_v<decltype(e.width)>);
  static_assert(!std::is_same_v<decltype(core_test::Mlp<128>{}.width), decltype(core_test::Mlp<256>{}.width)>);
  CHECK(int(e.width) == 256);
}

TEST_CASE("Device: a bound field reads and writes its slot; a copy is unbound") {
  nitro::Device<float> s{0.05f};
  CHECK(s.get() == doctest::Approx(0.05f));
  float slot = 0;
  s.bind_slot(&slot);
  CHECK(slot == doctest::Approx(0.05f));  // the value moved into the slot
  slot = 0.2f;                             // a schedule writes the slot...
  CHECK(float(s) == doctest::Approx(0.2f));  // ...and the field reads it
  s = 0.3f;
  CHECK(slot == doctest::Approx(0.3f));
  CHECK(s.slot() == &slot);
  nitro::Device<float> copy = s;
  CHECK_FALSE(copy.bound());
  CHECK(copy.get() == doctest::Approx(0.3f));
  slot = 0.9f;
  CHECK(copy.get() == doctest::Approx(0.3f));
}

TEST_CASE("NITRO_EXPERIMENT adapts every instantiation of a class template in one line") {
  static_assert(nitro::experiment<core_test::Mlp<64>>);
  static_assert(nitro::experiment<core_test::Mlp<512>>);
  static_assert(nitro::experiment<core_test::Plain>);
  static_assert(!nitro::experiment<core_test::Unadapted>);
  static_assert(nitro::experiment_traits<core_test::Mlp<64>>::complete);
  CHECK(nitro::experiment_traits<core_test::Mlp<64>>::name == "Mlp");
  std::vector<std::string> names, where;
  nitro::for_each_field<core_test::Mlp<64>>([&](auto d) {
    names.emplace_back(decltype(d)::name.view());
    where.emplace_back(nitro::to_string(decltype(d)::residency));
  });
  CHECK(names == std::vector<std::string>{"width", "smoothing", "lr", "name"});
  CHECK(where == std::vector<std::string>{"GraphConst", "Device", "Host", "Host"});
  CHECK(nitro::has_field<core_test::Plain>("a"));
  CHECK_FALSE(nitro::has_field<core_test::Plain>("c"));
}

TEST_CASE("adapted experiments are Hana Structs") {
  core_test::Mlp<64> e;
  e.lr = 0.5f;
  std::vector<std::string> keys;
  hana::for_each(hana::keys(e), [&](auto k) { keys.emplace_back(hana::to<char const*>(k)); });
  CHECK(keys == std::vector<std::string>{"width", "smoothing", "lr", "name"});
  CHECK(hana::at_key(e, BOOST_HANA_STRING("lr")) == doctest::Approx(0.5f));
}

TEST_CASE("trees: names, keypaths, leaf types") {
  using T = nitro::tree<nitro::entry<"layer_1", nitro::tree<nitro::entry<"weight", int>, nitro::entry<"bias", int>>>,
                        nitro::entry<"layer_2", nitro::tree<nitro::entry<"weight", int>>>>;
  T t;
  nitro::get<"weight">(nitro::get<"layer_1">(t)) = 7;
  std::vector<std::string> paths;
  nitro::for_each_leaf(t, [&](auto kp, int& v) { paths.emplace_back(kp.view()); v += 1; });
  CHECK(paths == std::vector<std::string>{"layer_1.weight", "layer_1.bias", "layer_2.weight"});
  CHECK(nitro::get<"weight">(nitro::get<"layer_1">(t)) == 8);
  static_assert(nitro::leaf_count<T>() == 3);
  REQUIRE(nitro::find_leaf<int>(t, "layer_2.weight") != nullptr);
  CHECK(nitro::find_leaf<int>(t, "layer_3.weight") == nullptr);
  T u;
  nitro::for_each_leaf2(t, u, [](auto, int const& a, int& b) { b = a * 10; });
  CHECK(nitro::get<"weight">(nitro::get<"layer_1">(u)) == 80);
}

TEST_CASE("rng: the same seed gives the same stream on every platform") {
  nitro::rng a(42), b(42), c(43);
  std::uint64_t first = a();
  CHECK(first == b());
  CHECK(first != c());
  // fixed reference values: xoshiro256** seeded by splitmix64(42)
  nitro::rng r(1);
  std::uint64_t v1 = r(), v2 = r();
  nitro::rng again(1);
  CHECK(again() == v1);
  CHECK(again() == v2);
  auto s = r.state();
  std::uint64_t next = r();
  r.set_state(s);
  CHECK(r() == next);
  // below(n) is uniform-ish and in range
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) { auto x = r.below(7); CHECK(x < 7); seen.insert(x); }
  CHECK(seen.size() == 7);
  CHECK(nitro::fold(1, 2) != nitro::fold(2, 1));
}

TEST_CASE("errors carry a code, a sentence and the fix") {
  nitro::error e("E-TEST-001", "something is wrong", "do this instead");
  CHECK(e.code() == "E-TEST-001");
  CHECK(std::string(e.what()) == "E-TEST-001: something is wrong\n  fix: do this instead");
}
