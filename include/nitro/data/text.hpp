// nitro/data/text.hpp — text as a data set: byte tokens in windows of seq + 1, for language models.
//
//   auto d = nitro::data::text_windows({.seq = 64});                 // Debian's fortunes
//   auto d = nitro::data::text_windows({.file = "my.txt", .seq = 64, .knob = "text"});
//
// Tokens are bytes (a vocabulary of 256, no tokenizer). The corpus is split into documents — a
// fortune file's `%` lines separate them; a user's file is split at blank lines — and each document
// goes whole to one split: number i (counted over the corpus in file order) to test when i % 20 is 0,
// to valid when it is 1, to train otherwise. So no document's text is in two splits, and the
// split is the same for every run. Each split's documents, joined by a newline, are cut into
// windows of seq + 1 bytes that overlap by one (window w starts at w * seq): a batch is
//   tokens   [seq, B]   bytes 0 .. seq-1 of each window (as floats: what embedding takes)
//   targets  [seq, B]   bytes 1 .. seq, the next byte of each token
// so every byte of a split but the first is a target exactly once. The loader's rules are the
// images' (data/loader.hpp): seeded order, resumable at any batch, gathered on a background thread.
//
// The default corpus is every fortune file of Debian's `fortunes` and `fortunes-min` packages
// (/usr/share/games/fortunes, or $NITRO_FORTUNES_DIR; BSD licence, from fortune-mod): about 2.6
// MB of English. A missing, empty or too short file, and one that is not UTF-8 text (a NUL byte: a
// binary file; bytes of another encoding), is a coded error naming the file and the knob that chose
// it (E-DATA-010..013), raised when the data set is built, before the first step.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/data/dataset.hpp"

#include <boost/hana/define_struct.hpp>

#include <array>    // byte counts
#include <cstdint>  // int64_t
#include <string>   // paths

namespace nitro::data {

struct text_batch {
  BOOST_HANA_DEFINE_STRUCT(text_batch, (nitro::Tensor, tokens), (nitro::Tensor, targets));
};

// The stock hook inputs of a text_batch: forward reads the tokens, loss and metrics the targets.
struct tokens_in {
  BOOST_HANA_DEFINE_STRUCT(tokens_in, (nitro::Tensor, tokens));
};
struct targets_in {
  BOOST_HANA_DEFINE_STRUCT(targets_in, (nitro::Tensor, targets));
};

struct text_options {
  std::string file{};         // empty: Debian's fortunes ($NITRO_FORTUNES_DIR, else /usr/share/games/fortunes)
  std::int64_t seq = 64;      // tokens a window predicts; a window holds seq + 1 bytes
  std::string knob = "text";  // the knob (or option) that names `file`, for the errors

  std::string key() const;  // the process cache's key
};

inline constexpr char const* fortunes_install_hint =
    "install the corpus: apt-get install fortunes (or set NITRO_FORTUNES_DIR to a folder of fortune files)";

// The folder the default corpus is read from: $NITRO_FORTUNES_DIR, else Debian's.
NITRO_RUNTIME_INLINE std::string fortunes_dir();

// The three splits (read once per process for the same options; later calls share the tensors).
NITRO_RUNTIME_INLINE dataset<text_batch> text_windows(text_options opt = {});

// A split's bytes, as its windows cover them (for baselines and generation prompts).
struct text_corpus {
  std::string train, valid, test;
};
NITRO_RUNTIME_INLINE text_corpus read_text_corpus(text_options const& opt);

// Bits per byte of `text` under the unigram byte distribution of `train` (add-one smoothed over
// the 256 bytes): the baseline a language model must beat.
NITRO_RUNTIME_INLINE double unigram_bits_per_byte(std::string const& train, std::string const& text);

}  // namespace nitro::data

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include "nitro/core/cache_stats.hpp"

#include <algorithm>   // sort
#include <cmath>       // log2
#include <cstdio>      // snprintf: a bad byte in hex
#include <cstdlib>     // getenv
#include <filesystem>  // the corpus folder
#include <fstream>     // reading
#include <iterator>    // istreambuf_iterator
#include <map>         // the process cache
#include <mutex>       // the process cache
#include <string_view> // UTF-8 checks
#include <vector>      // documents

namespace nitro::data {

NITRO_RUNTIME_INLINE std::string text_options::key() const { return file + "|" + std::to_string(seq); }

NITRO_RUNTIME_INLINE std::string fortunes_dir() {
  if (char const* env = std::getenv("NITRO_FORTUNES_DIR"); env && *env) return env;
  return "/usr/share/games/fortunes";
}

namespace detail {

inline std::string read_whole(std::string const& path, std::string const& what, std::string const& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("E-DATA-010", what + " " + path + " cannot be read (it does not exist, or is not a file)", fix);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Where `s` stops being well-formed UTF-8 (a stray continuation byte, a sequence cut short, an
// overlong form, a surrogate, a code point past U+10FFFF), or npos when it is UTF-8 throughout.
inline std::size_t first_invalid_utf8(std::string_view s) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (narrower after E0, ED, F0, F4)
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (i + len > n) return i;
    const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      const unsigned char ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// E-DATA-013 when `text` (of `subject`: "the text file F (knob K)") is not text: a NUL byte (a binary
// file) or bytes that are not UTF-8 (another encoding), named by offset and line.
inline void require_utf8_text(std::string const& text, std::string const& subject, std::string const& fix) {
  const std::size_t nul = text.find('\0');
  const std::size_t bad = first_invalid_utf8(text);
  if (nul == std::string::npos && bad == std::string_view::npos) return;
  const std::size_t at = std::min(nul, bad);
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[at])));
  const std::string where = "byte " + std::to_string(at) + " (line " + std::to_string(line) + ", " + hex + ")";
  if (at == nul) throw error("E-DATA-013", subject + " holds a NUL byte at " + where + ": a binary file, not text", fix);
  throw error("E-DATA-013", subject + " is not UTF-8 text: " + where + " starts no UTF-8 character", fix);
}

// Documents of a fortune file: the text between lines holding only "%".
inline void fortune_documents(std::string const& text, std::vector<std::string>& docs) {
  std::string doc;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line == "%") {
      if (!doc.empty()) docs.push_back(std::move(doc));
      doc.clear();
    } else {
      doc.append(line).push_back('\n');
    }
    at = end + 1;
  }
  if (!doc.empty()) docs.push_back(std::move(doc));
}

// Documents of a plain text file: paragraphs, the text between blank lines.
inline void paragraph_documents(std::string const& text, std::vector<std::string>& docs) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    std::size_t next = end;
    while (next < text.size() && text[next] == '\n') ++next;
    if (end > at) docs.emplace_back(text.substr(at, end - at + (end < text.size() ? 1 : 0)));
    at = next == end ? end + 1 : next;
  }
}

inline text_batch text_cut(std::string const& text, std::int64_t seq) {
  const std::int64_t n = static_cast<std::int64_t>(text.size());
  const std::int64_t windows = n >= seq + 1 ? (n - 1) / seq : 0;
  text_batch b{Tensor::owned({seq, windows}), Tensor::owned({seq, windows})};
  float* tok = b.tokens.data();
  float* tgt = b.targets.data();
  for (std::int64_t w = 0; w < windows; ++w)
    for (std::int64_t t = 0; t < seq; ++t) {
      tok[w * seq + t] = static_cast<float>(static_cast<unsigned char>(text[static_cast<std::size_t>(w * seq + t)]));
      tgt[w * seq + t] = static_cast<float>(static_cast<unsigned char>(text[static_cast<std::size_t>(w * seq + t + 1)]));
    }
  return b;
}

}  // namespace detail

NITRO_RUNTIME_INLINE text_corpus read_text_corpus(text_options const& opt) {
  if (opt.seq < 1)
    throw error("E-DATA-012", "text: seq = " + std::to_string(opt.seq) + " tokens a window", "use a sequence length of at least 1");
  std::vector<std::string> docs;
  std::string where;
  if (opt.file.empty()) {
    const std::string dir = fortunes_dir();
    where = "the fortunes in " + dir;
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (auto const& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat" && e.path().extension() != ".u8") files.push_back(e.path());
    if (files.empty())
      throw error("E-DATA-010", "the default corpus (knob " + opt.knob + " unset) finds no fortune files in " + dir, fortunes_install_hint);
    std::sort(files.begin(), files.end());
    for (auto const& f : files) {
      const std::string text = detail::read_whole(f.string(), "the fortune file", fortunes_install_hint);
      detail::require_utf8_text(text, "the fortune file " + f.string(), fortunes_install_hint);  // E-DATA-013
      detail::fortune_documents(text, docs);
    }
  } else {
    where = opt.file;
    const std::string fix = "point the knob " + opt.knob + " at a text file (--set " + opt.knob + "=path/to/file.txt)";
    const std::string text = detail::read_whole(opt.file, "the text file (knob " + opt.knob + ")", fix);
    if (text.empty()) throw error("E-DATA-011", "the text file " + opt.file + " (knob " + opt.knob + ") is empty", fix);
    detail::require_utf8_text(text, "the text file " + opt.file + " (knob " + opt.knob + ")",
                              "convert it to UTF-8 (iconv -f LATIN1 -t UTF-8 " + opt.file + " > text.txt) and point the knob " + opt.knob +
                                  " at that, or at another text file");  // E-DATA-013
    if (static_cast<std::int64_t>(text.size()) < opt.seq + 1)
      throw error("E-DATA-012",
                  "the text file " + opt.file + " (knob " + opt.knob + ") holds " + std::to_string(text.size()) +
                      " bytes, fewer than one window of seq + 1 = " + std::to_string(opt.seq + 1),
                  "give it more text, or a shorter seq");
    detail::paragraph_documents(text, docs);
  }
  text_corpus c;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    std::string& to = i % 20 == 0 && docs.size() >= 20 ? c.test : i % 20 == 1 && docs.size() >= 20 ? c.valid : c.train;
    if (!to.empty()) to.push_back('\n');
    to += docs[i];
  }
  if (static_cast<std::int64_t>(c.train.size()) < opt.seq + 1)
    throw error("E-DATA-012",
                where + " (knob " + opt.knob + ") leaves " + std::to_string(c.train.size()) +
                    " bytes for training, fewer than one window of seq + 1 = " + std::to_string(opt.seq + 1),
                "give it more text, or a shorter seq");
  return c;
}

NITRO_RUNTIME_INLINE dataset<text_batch> text_windows(text_options opt) {
  static std::mutex mutex;
  static std::map<std::string, dataset<text_batch>> cache;
  static cache_counter& counter = runtime_cache("data.text");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(opt.key()); it != cache.end()) {
    counter.hit();
    return it->second;
  }
  counter.miss();
  const text_corpus c = read_text_corpus(opt);
  dataset<text_batch> d;
  d.name = opt.file.empty() ? "fortunes" : "text";
  d.splits.emplace_back("train", detail::text_cut(c.train, opt.seq));
  for (auto [name, text] : {std::pair{"valid", &c.valid}, std::pair{"test", &c.test}})
    if (static_cast<std::int64_t>(text->size()) >= opt.seq + 1) d.splits.emplace_back(name, detail::text_cut(*text, opt.seq));
  d.fingerprint = (opt.file.empty() ? "fortunes:" + fortunes_dir() : "text:" + opt.file) + ":train=" + std::to_string(c.train.size()) +
                  "B:valid=" + std::to_string(c.valid.size()) + "B:test=" + std::to_string(c.test.size()) + "B:seq=" + std::to_string(opt.seq);
  cache.emplace(opt.key(), d);
  return d;
}

NITRO_RUNTIME_INLINE double unigram_bits_per_byte(std::string const& train, std::string const& text) {
  std::array<double, 256> count{};
  count.fill(1.0);
  for (unsigned char ch : train) count[ch] += 1;
  double total = 0;
  for (double v : count) total += v;
  double bits = 0;
  for (unsigned char ch : text) bits -= std::log2(count[ch] / total);
  return text.empty() ? 0.0 : bits / static_cast<double>(text.size());
}

}  // namespace nitro::data
#endif  // !NITRO_RUNTIME_EXTERN
