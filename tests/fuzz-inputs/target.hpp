// The work of one fuzz input, shared by the libFuzzer target and the corpus replay. The first byte
// chooses the reader (its low 3 bits modulo 5, so the corpus starts with '0'..'4'); the rest is its input:
//   '0'  an IDX file (Fashion-MNIST's format, gzip'd or not): data::read_idx, then as the images and as
//        the labels of a Fashion-MNIST pair beside a valid partner (data::detail::read_fm_pair, fm_select)
//   '1'  the weights / resume reference grammar: weights_ref::from_text, resume_ref::of, to_string,
//        detail::checkpoint_part_of, resolve() against a small runs directory, cli::weights_in_run (eval's
//        and bundle's --weights), run_stem, to_run_reference
//   '2'  a run's manifest.json, read back as --resume reads it (read_json, the experiment check,
//        selection_request::from_json, resolve_selection), and as `report`, `diff` and `watch` read it
//        (cli::detail::load_run, cli::run_report_html, cli::diff_text, cli::watch, cli::monitored_metric)
//   '3'  a run's status.json beside a valid manifest: read_json, the same readers, cli::final_metrics
//   '4'  a text corpus: one flag byte (seq = 1 + low 4 bits; bit 4: a fortune file, else a plain text
//        file), then the file: detail::first_invalid_utf8 (against an independent decoder),
//        require_utf8_text, fortune_documents, paragraph_documents, read_text_corpus, text_cut
// Files are written under a per-process folder in the temporary directory, removed at exit. Only
// nitro::error may come out; anything else (another exception, a crash, a sanitizer report, a broken
// invariant: __builtin_trap) is a bug in the reader.
#pragma once

#include <nitro/cli/commands.hpp>
#include <nitro/cli/report.hpp>
#include <nitro/core/reflect.hpp>
#include <nitro/data/fashion_mnist.hpp>
#include <nitro/data/idx.hpp>
#include <nitro/data/text.hpp>
#include <nitro/knobs/catalog.hpp>
#include <nitro/knobs/records.hpp>
#include <nitro/knobs/selection.hpp>
#include <nitro/record/checkpoint_index.hpp>
#include <nitro/record/run_reference.hpp>
#include <nitro/record/weights_ref.hpp>
#include <nitro/record/weights_resolve.hpp>

#include <cmath>        // isfinite
#include <cstddef>      // size_t
#include <cstdint>      // uint8_t
#include <cstdlib>      // setenv
#include <filesystem>   // the scratch folder
#include <fstream>      // writing inputs
#include <sstream>      // watch's output
#include <string>       // bytes
#include <string_view>  // texts
#include <vector>       // documents

#include <unistd.h>  // getpid

namespace nitro_fuzz_inputs {

// A small experiment for the manifests: the catalog a resume resolves a recorded selection against.
template <int Width = 8>
struct Exp {
  nitro::GraphConst<int, Width> width;
  float lr = 1e-3f;
  int layers = 4;
  std::string optimizer = "adamw";
  bool warmup = true;
  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak"), nitro::knob<"width">(), nitro::knob<"layers">(), nitro::knob<"optimizer">(),
                        nitro::knob<"warmup">(), nitro::knob<"seed">());
  }
  static constexpr auto variants() { return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"width">(16))); }
};
NITRO_EXPERIMENT(Exp, width, lr, layers, optimizer, warmup);

inline nitro::catalog const& cat() {
  static const nitro::catalog c = nitro::make_catalog<Exp<8>, Exp<16>>();
  return c;
}

inline void write_file(std::filesystem::path const& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ---- valid files: the partners of a fuzzed file, and the seed corpus's valid inputs ------------------
inline std::string idx_bytes(std::vector<std::uint32_t> const& dims, std::string const& elements) {
  std::string s = {'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (auto d : dims)
    for (int k = 3; k >= 0; --k) s += static_cast<char>((d >> (8 * k)) & 0xff);
  return s + elements;
}
inline std::string valid_images(std::uint32_t n) {
  std::string px(std::size_t(n) * 784, '\0');
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<char>((i * 37) & 0xff);
  return idx_bytes({n, 28, 28}, px);
}
inline std::string valid_labels(std::uint32_t n) {
  std::string l;
  for (std::uint32_t i = 0; i < n; ++i) l += static_cast<char>(i % 10);
  return idx_bytes({n}, l);
}

inline nitro::selection valid_selection() { return nitro::resolve_selection(cat(), nitro::selection_request{}); }

inline std::string valid_manifest(std::string const& slug) {
  nitro::run_identity id;
  id.slug = slug;
  id.id = "7f3a";
  id.program = cat().programs[0];
  id.started = "2025-01-07T14:15:02.123Z";
  id.command = "fuzz run";
  id.run_keywords = {{"monitor", {{"value", "valid.loss (min)"}, {"source", "default"}}}, {"schedules", {{"value", "lr"}, {"source", "default"}}}};
  id.data = {{"name", "fuzz"}, {"classes", {"a", "b"}}};
  nitro::ordered_json m = nitro::manifest_json(cat(), valid_selection(), id);
  m["host"] = "fuzz-host";  // fixed: the corpus names no machine
  m["pid"] = 1;
  return m.dump(2) + "\n";
}

inline std::string valid_status(std::string const& slug) {
  nitro::status_record st;
  st.state = "finished";
  st.slug = slug;
  st.selection = nitro::selection_json(cat(), valid_selection());
  st.step = 20;
  st.epoch = 2;
  st.horizon_steps = 20;
  st.horizon_epochs = 2;
  st.last = {{"train/loss", 0.5}, {"valid/loss", 0.6}};
  st.best_value = 0.6;
  st.best_metric = "valid/loss";
  st.best_step = 20;
  st.started = "2025-01-07T14:15:02.123Z";
  st.finished = "2025-01-07T14:16:02.123Z";
  nitro::ordered_json j = st.json();
  j["heartbeat"] = "2025-01-07T14:16:02.123Z";  // fixed: the corpus names no machine
  j["pid"] = 1;
  j["host"] = "fuzz-host";
  return j.dump(2) + "\n";
}

inline std::string valid_metrics(std::string const& slug) {
  nitro::run_identity id;
  id.slug = slug;
  id.id = "7f3a";
  id.program = cat().programs[0];
  id.started = "2025-01-07T14:15:02.123Z";
  std::string s = nitro::metrics_metadata_json(cat(), valid_selection(), id).dump() + "\n";
  s += R"({"type":"metrics","split":"train","step":10,"epoch":1,"wall_time":1.5,"loss":0.7,"lr":0.001})" "\n";
  s += R"({"type":"metrics","split":"valid","step":10,"epoch":1,"wall_time":1.6,"loss":0.65,"confusion":{"shape":[2,2],"data":[3,1,0,4]}})" "\n";
  s += R"({"type":"metrics","split":"train","step":20,"epoch":2,"wall_time":3.0,"loss":0.5,"lr":0.0005})" "\n";
  s += R"({"type":"end","status":"finished","step":20})" "\n";
  return s;
}

// ---- the per-process folder ------------------------------------------------------------------------
//   fm-images/{images (fuzzed), labels}   fm-labels/{images, labels (fuzzed)}   idx (fuzzed)
//   runs/fuzz-alpha (3 checkpoints, monitor valid.loss), runs/fuzz-beta (1, valid.acc max),
//   runs/fuzz-m (manifest fuzzed), runs/fuzz-s (status fuzzed)   text.txt   fortunes/fuzz
struct scratch_dir {
  std::filesystem::path root;
  scratch_dir() {
    namespace fs = std::filesystem;
    root = fs::temp_directory_path() / ("nitro-fuzz-inputs-" + std::to_string(::getpid()));
    fs::remove_all(root);
    for (char const* d : {"fm-images", "fm-labels", "runs/fuzz-alpha/checkpoints", "runs/fuzz-beta/checkpoints", "runs/fuzz-m", "runs/fuzz-s", "fortunes"})
      fs::create_directories(root / d);
    write_file(root / "fm-images" / "labels", valid_labels(3));
    write_file(root / "fm-labels" / "images", valid_images(3));
    for (char const* slug : {"fuzz-alpha", "fuzz-beta", "fuzz-m", "fuzz-s"}) {
      const fs::path run = root / "runs" / slug;
      write_file(run / "manifest.json", valid_manifest(slug));
      write_file(run / "status.json", valid_status(slug));
      write_file(run / "metrics.jsonl", valid_metrics(slug));
      write_file(run / "binding_report.txt", "fuzz\n");
    }
    auto index = [&](char const* slug, char const* monitor, nitro::monitor_mode mode, int n) {
      nitro::checkpoint_index idx;
      idx.monitor = monitor;
      idx.mode = mode;
      for (int i = 1; i <= n; ++i) {
        nitro::checkpoint_entry e;
        e.file = nitro::detail::checkpoint_file_name(i * 10);
        e.step = i * 10;
        e.epoch = i;
        e.seq = i;
        e.time_ns = 1000 * i + (mode == nitro::monitor_mode::max ? 1 : 0);
        e.metrics[monitor] = 1.0 / i;
        idx.entries.push_back(e);
        write_file(root / "runs" / slug / "checkpoints" / e.file, "");
      }
      idx.next_seq = n + 1;
      idx.updated_ns = 1000 * n;
      idx.store(root / "runs" / slug / "checkpoints");
    };
    index("fuzz-alpha", "valid.loss", nitro::monitor_mode::min, 3);
    index("fuzz-beta", "valid.acc", nitro::monitor_mode::max, 1);
    ::setenv("NITRO_FORTUNES_DIR", (root / "fortunes").c_str(), 1);  // the default corpus: the fuzzed fortune file
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  std::filesystem::path operator/(char const* p) const { return root / p; }
};
inline scratch_dir const& scratch() {
  static const scratch_dir s;
  return s;
}

// ---- '0': IDX ----------------------------------------------------------------------------------------
inline bool one_idx(std::string_view bytes) {
  auto const& s = scratch();
  write_file(s / "idx", bytes);
  bool accepted = false;
  try {
    nitro::data::idx_array a = nitro::data::read_idx((s / "idx").string(), "fuzz");
    if (a.dims.empty() || a.dims.size() > 4) __builtin_trap();
    std::size_t total = 1;
    for (auto d : a.dims) total *= static_cast<std::size_t>(d);
    if (total != a.bytes.size() || a.count() != a.dims[0]) __builtin_trap();  // every declared element was read
    accepted = true;
  } catch (nitro::error const&) {
  }
  // as the images, then the labels, of a Fashion-MNIST pair
  write_file(s / "fm-images" / "images", bytes);
  write_file(s / "fm-labels" / "labels", bytes);
  for (char const* dir : {"fm-images", "fm-labels"}) {
    try {
      auto raw = nitro::data::detail::read_fm_pair((s / dir).string(), "images", "labels");
      std::vector<std::int64_t> all(static_cast<std::size_t>(raw.images.count()));
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
      (void)nitro::data::detail::fm_select(raw, all);
    } catch (nitro::error const&) {
    }
  }
  return accepted;
}

// ---- '1': the reference grammar ----------------------------------------------------------------------
inline bool one_reference(std::string_view text) {
  auto const& s = scratch();
  const std::string runs = (s / "runs").string();
  try {
    (void)nitro::detail::checkpoint_part_of(text, text);
  } catch (nitro::error const&) {
  }
  const std::string stem = nitro::detail::run_stem(text);
  if (stem.empty() || stem.size() > 48) __builtin_trap();
  try {
    auto r = nitro::to_run_reference(std::string(text), runs);
    if (!r || r->dir.empty()) __builtin_trap();
  } catch (nitro::error const&) {
  }
  try {  // eval's and bundle's --weights: a checkpoint of the run the command names
    const std::string alpha = (s / "runs/fuzz-alpha").string();
    (void)nitro::resolve(nitro::cli::weights_in_run(alpha, std::string(text)), {.runs_dir = runs});
  } catch (nitro::error const&) {
  }
  try {
    nitro::weights_ref r = nitro::weights_ref::from_text(text);
    const std::string written = r.to_string();
    if (r.which() == nitro::weights_ref::kind::checkpoint) {
      if (r.pick().n < 1) __builtin_trap();
      // what the text names, read back from the checkpoint part it printed
      auto again = nitro::detail::checkpoint_part_of(r.pick().to_string(), written);
      if (!again || again->best != r.pick().best || again->n != r.pick().n || again->average != r.pick().average) __builtin_trap();
      try {
        (void)nitro::resume_ref::of(r).to_string();
      } catch (nitro::error const&) {
      }
      // what it names in the runs directory (never a path of the input's: a run id with '/' is one)
      if (r.run().k != nitro::run_pick::kind::id || r.run().id.find('/') == std::string::npos) {
        for (bool own : {false, true}) {
          try {
            nitro::resolve_context ctx{.runs_dir = runs, .own_run = s / "runs/fuzz-alpha", .bare_is_own = own};
            auto w = nitro::resolve(r, ctx);
            if (w.checkpoints.empty() || (!w.average && w.checkpoints.size() != 1)) __builtin_trap();
          } catch (nitro::error const&) {
          }
        }
      }
    }
    return true;
  } catch (nitro::error const&) {
    return false;
  }
}

// ---- '2', '3': a run's manifest.json and status.json ------------------------------------------------
// The commands that read a run's records: report, diff (against a valid run) and watch (one look: a
// timeout of 0 s).
inline void readers_of(std::filesystem::path const& run) {
  try {
    auto v = nitro::cli::detail::load_run(run.string());
    (void)v.state();
    (void)nitro::cli::run_report_html(run.string());
  } catch (nitro::error const&) {
  }
  try {
    (void)nitro::cli::diff_text((scratch() / "runs/fuzz-alpha").string(), run.string());
  } catch (nitro::error const&) {
  }
  try {
    std::ostringstream out, err;
    nitro::cli::context ctx{"fuzz", "fuzz", "fuzz", out, err};
    (void)nitro::cli::watch(ctx, run.string(), 0.001, 0.0);
  } catch (nitro::error const&) {
  }
}

// --resume RUN with no selection flags: the selection the run was made with (cli/main.hpp's recorded_selection).
inline bool one_manifest(std::string_view bytes) {
  auto const& s = scratch();
  const auto run = s / "runs/fuzz-m";
  write_file(run / "manifest.json", bytes);
  bool accepted = false;
  try {
    nitro::ordered_json m = nitro::read_json((run / "manifest.json").string());
    if (m.contains("experiment") && m["experiment"] == cat().experiment) {
      nitro::selection_request req = nitro::selection_request::from_json(m.value("selection", nitro::ordered_json::object()));
      if (!(nitro::selection_request::from_json(req.json()) == req)) __builtin_trap();  // the record gives the selection back
      nitro::selection sel = nitro::resolve_selection(cat(), req);
      constexpr auto replace = nlohmann::json::error_handler_t::replace;  // recorded --set values need not be UTF-8
      (void)nitro::knobs_json(cat(), sel).dump(-1, ' ', false, replace);
      (void)nitro::selection_json(cat(), sel).dump(-1, ' ', false, replace);
      accepted = true;
    }
    (void)nitro::cli::monitored_metric(nitro::read_json((run / "status.json").string()), m);
  } catch (nitro::error const&) {
  }
  readers_of(run);
  return accepted;
}

inline bool one_status(std::string_view bytes) {
  auto const& s = scratch();
  const auto run = s / "runs/fuzz-s";
  write_file(run / "status.json", bytes);
  bool accepted = false;
  try {
    nitro::ordered_json st = nitro::read_json((run / "status.json").string());
    accepted = st.is_object();
    (void)nitro::cli::final_metrics(st);
    (void)nitro::cli::monitored_metric(st, nitro::read_json((run / "manifest.json").string()));
  } catch (nitro::error const&) {
  }
  readers_of(run);
  return accepted;
}

// ---- '4': text --------------------------------------------------------------------------------------
// Where s stops being UTF-8, decoded the long way (code points, then their ranges): the reader's
// table-driven check must agree.
inline std::size_t reference_first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned ck = static_cast<unsigned char>(s[i + k]);
      if ((ck & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (ck & 0x3F);
    }
    const std::uint32_t least = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

inline bool one_text(std::string_view bytes) {
  if (bytes.empty()) return false;
  const auto flags = static_cast<unsigned char>(bytes[0]);
  const std::int64_t seq = 1 + (flags & 15);
  const bool fortune = (flags & 16) != 0;
  const std::string text(bytes.substr(1));
  if (nitro::data::detail::first_invalid_utf8(text) != reference_first_invalid_utf8(text)) __builtin_trap();
  try {
    nitro::data::detail::require_utf8_text(text, "the fuzz input", "none");
  } catch (nitro::error const&) {
  }
  for (bool f : {false, true}) {
    std::vector<std::string> docs;
    if (f) nitro::data::detail::fortune_documents(text, docs);
    else nitro::data::detail::paragraph_documents(text, docs);
    for (auto const& d : docs)
      if (d.empty()) __builtin_trap();  // no empty document
  }
  auto const& s = scratch();
  const auto path = fortune ? s / "fortunes/fuzz" : s / "text.txt";
  write_file(path, text);
  try {
    const nitro::data::text_options opt{.file = fortune ? std::string() : path.string(), .seq = seq, .knob = "text"};
    const nitro::data::text_corpus c = nitro::data::read_text_corpus(opt);
    for (std::string const* split : {&c.train, &c.valid, &c.test}) {
      if (static_cast<std::int64_t>(split->size()) < seq + 1) continue;
      auto b = nitro::data::detail::text_cut(*split, seq);
      if (b.tokens.size(1) != (static_cast<std::int64_t>(split->size()) - 1) / seq) __builtin_trap();  // every byte but the first is a target
    }
    if (!std::isfinite(nitro::data::unigram_bits_per_byte(c.train, c.valid))) __builtin_trap();
    return true;
  } catch (nitro::error const&) {
    return false;
  }
}

// ---- the selector ------------------------------------------------------------------------------------
inline constexpr char const* reader_names[] = {"idx", "reference", "manifest", "status", "text"};

inline int reader_of(std::uint8_t first) { return (first & 7) % 5; }

// True when the reader accepted the input.
inline bool one_input(std::uint8_t const* data, std::size_t size) {
  if (size == 0) return false;
  const std::string_view rest(reinterpret_cast<char const*>(data) + 1, size - 1);
  switch (reader_of(data[0])) {
    case 0: return one_idx(rest);
    case 1: return one_reference(rest);
    case 2: return one_manifest(rest);
    case 3: return one_status(rest);
    default: return one_text(rest);
  }
}

}  // namespace nitro_fuzz_inputs
