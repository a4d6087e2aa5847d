// libFuzzer target: the command-line parser, the selection and sweep expansion of a small
// experiment with two compiled programs, knob values of every kind, and the tar reader. Every input
// must end in a result or a nitro::error — never a crash, a hang, a leak or undefined behaviour.
//
// Input: arguments separated by NUL bytes (or newlines), as a shell would pass them.
#include <nitro/cli/args.hpp>
#include <nitro/cli/tar.hpp>
#include <nitro/core/reflect.hpp>
#include <nitro/knobs/catalog.hpp>
#include <nitro/knobs/records.hpp>
#include <nitro/knobs/selection.hpp>
#include <nitro/knobs/slug.hpp>
#include <nitro/knobs/sweep_points.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fuzz {
template <int Width = 8>
struct Exp {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  float lr = 1e-3f;
  int layers = 4;
  std::string optimizer = "adamw";
  bool warmup = true;
  std::uint16_t seq = 64;
  double wd = 0.0;
  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak"), nitro::knob<"width">(), nitro::knob<"layers">(), nitro::knob<"optimizer">(),
                        nitro::knob<"smoothing">(), nitro::knob<"warmup">(), nitro::knob<"seq">(), nitro::knob<"wd">(),
                        nitro::knob<"max_epochs">(), nitro::knob<"batch_size">());
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"width">(16)),
                           nitro::variant<"smoke">(nitro::set<"seq">(8), nitro::set<"warmup">(false)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)),
                         nitro::sweep<"grid">(nitro::base<"small">, nitro::axis<"lr">(0.1, 0.2), nitro::axis<"optimizer">("a", "b")),
                         nitro::sweep<"widths">(nitro::axis<"width">(8, 16)));
  }
};
NITRO_EXPERIMENT(Exp, width, smoothing, lr, layers, optimizer, warmup, seq, wd);
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  static const nitro::catalog cat = nitro::make_catalog<fuzz::Exp<8>, fuzz::Exp<16>>();
  const std::string input(reinterpret_cast<char const*>(data), size);

  std::vector<std::string> args;
  std::string cur;
  for (char c : input) {
    if (c == '\0' || c == '\n') {
      args.push_back(cur);
      cur.clear();
      if (args.size() > 64) break;
    } else {
      cur += c;
    }
  }
  if (!cur.empty() && args.size() <= 64) args.push_back(cur);

  try {
    nitro::cli::parsed_args a = nitro::cli::parse_args(args);
    if (a.help) {
      (void)nitro::cli::help_text("fuzz", a.command);
    } else {
      nitro::selection s = nitro::resolve_selection(cat, a.selection);
      constexpr auto replace = nlohmann::json::error_handler_t::replace;  // --set values need not be UTF-8
      (void)nitro::knobs_json(cat, s).dump(-1, ' ', false, replace);
      (void)nitro::selection_json(cat, s).dump(-1, ' ', false, replace);
      (void)nitro::make_slug(cat.experiment, a.selection, a.id.value_or("id"));
      auto back = nitro::selection_request::from_json(a.selection.json());
      if (!(back == a.selection)) __builtin_trap();  // the record must give the selection back
      if (a.command == "sweep" && !a.positional.empty())
        for (auto const& p : nitro::sweep_points(cat, a.positional[0], a.selection)) (void)nitro::resolve_selection(cat, p);
    }
  } catch (nitro::error const& e) {
    if (e.code().empty() || std::string(e.what()).find(e.code()) != 0) __builtin_trap();  // every error carries its code
  }

  // the raw input as a value of every knob kind
  for (auto k : {nitro::knob_kind::boolean, nitro::knob_kind::integer, nitro::knob_kind::unsigned_integer, nitro::knob_kind::real32,
                 nitro::knob_kind::real64, nitro::knob_kind::text}) {
    try {
      nitro::knob_value v = nitro::parse_knob_value("k", k, nitro::knob_range::of<int>(), input);
      nitro::knob_value again = nitro::parse_knob_value("k", k, nitro::knob_range::of<int>(), v.str());
      if (!(again == v)) __builtin_trap();  // what is printed reads back as the same value
    } catch (nitro::error const&) {
    }
  }
  // and as a tar archive
  try {
    (void)nitro::cli::read_tar(input);
  } catch (nitro::error const&) {
  }
  return 0;
}
