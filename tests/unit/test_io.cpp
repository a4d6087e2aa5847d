// data/: the IDX reader (intact, missing, damaged files), Fashion-MNIST, and the loader.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <chrono>
#include <set>
#include <thread>
#include <vector>
#include "../support/nitro_test.hpp"

namespace fs = std::filesystem;

namespace {
std::vector<unsigned char> idx_bytes(std::vector<std::int32_t> dims, int fill) {
  std::vector<unsigned char> b{0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  std::int64_t n = 1;
  for (auto d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>((d >> s) & 0xff));
    n *= d;
  }
  for (std::int64_t i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>((i + fill) % 10));
  return b;
}
void write_gz(fs::path const& p, std::vector<unsigned char> const& bytes) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}
void write_raw(fs::path const& p, std::vector<unsigned char> const& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<char const*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

TEST_CASE("IDX: gzip'd and plain files read back exactly") {
  auto dir = nitro_test::tmp_dir("io");
  auto bytes = idx_bytes({3, 2, 2}, 1);
  write_gz(dir / "a.gz", bytes);
  write_raw(dir / "a.idx", bytes);
  for (auto name : {"a.gz", "a.idx"}) {
    auto a = nitro::data::read_idx((dir / name).string());
    CHECK(a.dims == std::vector<std::int64_t>{3, 2, 2});
    REQUIRE(a.bytes.size() == 12);
    CHECK(a.bytes[0] == 1);
    CHECK(a.bytes[11] == 2);
  }
}

TEST_CASE("IDX: missing and damaged files are coded errors naming the file, never a crash") {
  auto dir = nitro_test::tmp_dir("io");
  CHECK_THROWS_WITH_AS(nitro::data::read_idx((dir / "nope.gz").string(), "apt-get install x"),
                       doctest::Contains("E-DATA-001"), nitro::error);
  try {
    nitro::data::read_idx((dir / "nope.gz").string(), "apt-get install dataset-fashion-mnist");
  } catch (nitro::error const& e) {
    CHECK(e.fix() == "apt-get install dataset-fashion-mnist");
    CHECK(e.sentence().find("nope.gz") != std::string::npos);
  }
  auto good = idx_bytes({100, 28, 28}, 0);
  // truncated in the middle of the elements
  write_gz(dir / "short.gz", std::vector<unsigned char>(good.begin(), good.begin() + 500));
  CHECK_THROWS_WITH_AS(nitro::data::read_idx((dir / "short.gz").string()), doctest::Contains("ends early"), nitro::error);
  // not IDX at all
  write_raw(dir / "text.idx", {'h', 'e', 'l', 'l', 'o', '!', '!', '!'});
  CHECK_THROWS_WITH_AS(nitro::data::read_idx((dir / "text.idx").string()), doctest::Contains("E-DATA-002"), nitro::error);
  // a gzip stream cut short: the compressed bytes truncated
  write_gz(dir / "full.gz", good);
  std::ifstream in(dir / "full.gz", std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), {});
  write_raw(dir / "cut.gz", std::vector<unsigned char>(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  CHECK_THROWS_AS(nitro::data::read_idx((dir / "cut.gz").string()), nitro::error);
  // garbage after the declared elements
  auto extra = good;
  extra.push_back(1);
  write_raw(dir / "extra.idx", extra);
  CHECK_THROWS_WITH_AS(nitro::data::read_idx((dir / "extra.idx").string()), doctest::Contains("bytes after"), nitro::error);
  // an absurd extent
  write_raw(dir / "huge.idx", {0, 0, 8, 1, 0x7f, 0xff, 0xff, 0xff});
  CHECK_THROWS_AS(nitro::data::read_idx((dir / "huge.idx").string()), nitro::error);
}

TEST_CASE("Fashion-MNIST: the Debian data set, split into train, valid and test") {
  auto d = nitro::data::fashion_mnist();
  CHECK(d.split("train").size() == 55000);
  CHECK(d.split("valid").size() == 5000);
  CHECK(d.split("test").size() == 10000);
  auto const& test = d.split("test").all();
  CHECK(test.img.shape() == nitro::shape{28, 28, 1, 10000});
  CHECK(test.label.shape() == nitro::shape{10, 10000});
  // every label column is one-hot; pixels are in [0, 1]
  for (std::int64_t i = 0; i < 10000; i += 997) {
    float s = 0;
    for (int c = 0; c < 10; ++c) s += test.label(c, i);
    CHECK(s == 1.0f);
  }
  float mx = 0;
  for (std::int64_t i = 0; i < test.img.numel(); i += 13) mx = std::max(mx, test.img[i]);
  CHECK(mx <= 1.0f);
  CHECK(mx > 0.9f);
  // train and valid are disjoint and together the whole training file
  std::set<std::int64_t> seen;
  for (auto name : {"train", "valid"}) {
    auto const& idx = d.split(name).all().idx;
    for (std::int64_t i = 0; i < idx.numel(); ++i) CHECK(seen.insert(idx[i]).second);
  }
  CHECK(seen.size() == 60000);
  CHECK_THROWS_WITH_AS(d.split("dev"), doctest::Contains("E-DATA-004"), nitro::error);
  auto small = nitro::data::fashion_mnist({.valid = 100, .train_limit = 1000, .test_limit = 200});
  CHECK(small.split("train").size() == 1000);
  CHECK(small.split("test").size() == 200);
}

TEST_CASE("Fashion-MNIST: a folder with a truncated file, a label out of range or counts that disagree is E-DATA-002 naming the file, before any batch") {
  const fs::path base = nitro_test::tmp_dir("io") / "fm_bad";
  const auto images = idx_bytes({100, 28, 28}, 0), labels = idx_bytes({100}, 0);
  int folder = 0;
  fs::path dir;
  // a folder of the four files (train's given, test's intact) read once; the process caches only good reads
  auto message_of = [&](std::vector<unsigned char> const& train_images, std::vector<unsigned char> const& train_labels) {
    dir = base / std::to_string(folder++);
    fs::create_directories(dir);
    write_gz(dir / "train-images-idx3-ubyte.gz", train_images);
    write_gz(dir / "train-labels-idx1-ubyte.gz", train_labels);
    write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({20, 28, 28}, 0));
    write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({20}, 0));
    try {
      nitro::data::fashion_mnist({.dir = dir.string(), .valid = 10});
    } catch (nitro::error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of(images, labels) == "no error");
  auto out_of_range = labels;
  out_of_range[8 + 37] = 12;  // the 38th label
  CHECK(message_of(images, out_of_range).rfind("E-DATA-002: the data file " + (dir / "train-labels-idx1-ubyte.gz").string() +
                                                " is damaged: it holds the label 12", 0) == 0);
  const std::string m = message_of(images, idx_bytes({99}, 0));
  CHECK(m.rfind("E-DATA-002: the data files " + (dir / "train-images-idx3-ubyte.gz").string(), 0) == 0);
  CHECK(m.find("disagree: 100 images but 99 labels") != std::string::npos);
  const std::string cut = message_of(std::vector<unsigned char>(images.begin(), images.begin() + 40000), labels);
  CHECK(cut.rfind("E-DATA-002: the data file " + (dir / "train-images-idx3-ubyte.gz").string() + " is damaged", 0) == 0);
  CHECK(cut.find("ends early") != std::string::npos);
}

TEST_CASE("Fashion-MNIST: a missing folder names the install command") {
  try {
    nitro::data::fashion_mnist({.dir = (nitro_test::tmp_dir("io") / "absent").string()});
    FAIL("expected an error");
  } catch (nitro::error const& e) {
    CHECK(e.code() == "E-DATA-001");
    CHECK(e.fix().find("apt-get install dataset-fashion-mnist") != std::string::npos);
  }
}

TEST_CASE("loader: every sample once per epoch, seeded order, resumable at any batch") {
  auto d = nitro::data::fashion_mnist({.valid = 100, .train_limit = 1000, .test_limit = 200});
  auto const& train = d.split("train");
  auto order_of = [&](std::uint64_t seed, std::uint64_t epoch, std::int64_t first = 0) {
    nitro::data::loader<nitro::data::image_batch> ld(train, {.batch_size = 64, .shuffle = true, .drop_last = true, .prefetch = 2, .seed = seed});
    ld.start_epoch(epoch, first);
    std::vector<std::int64_t> ids;
    while (auto b = ld.next()) {
      CHECK(b->img.batch() == 64);
      CHECK(b->label.batch() == 64);
      for (std::int64_t i = 0; i < b->idx.numel(); ++i) ids.push_back(b->idx[i]);
    }
    return ids;
  };
  auto a = order_of(1, 0), b = order_of(1, 0), c = order_of(1, 1), e = order_of(2, 0);
  CHECK(a.size() == 1000 / 64 * 64);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != e);
  CHECK(std::set<std::int64_t>(a.begin(), a.end()).size() == a.size());
  auto resumed = order_of(1, 0, 5);
  CHECK(std::vector<std::int64_t>(a.begin() + 5 * 64, a.end()) == resumed);

  nitro::data::loader<nitro::data::image_batch> ev(d.split("test"), {.batch_size = 64, .shuffle = false, .drop_last = false});
  ev.start_epoch(0);
  std::int64_t total = 0, last = 0;
  while (auto bt = ev.next()) { total += bt->img.batch(); last = bt->img.batch(); }
  CHECK(total == 200);
  CHECK(last == 200 % 64);
  CHECK(ev.batches_per_epoch() == 4);
}

TEST_CASE("loader: without prefetch (one buffer) every batch still arrives") {
  auto d = nitro::data::fashion_mnist({.valid = 100, .train_limit = 1000, .test_limit = 200});
  nitro::data::loader<nitro::data::image_batch> ld(d.split("test"), {.batch_size = 50, .shuffle = false, .drop_last = false, .prefetch = 0});
  for (int epoch = 0; epoch < 2; ++epoch) {
    ld.start_epoch(static_cast<std::uint64_t>(epoch));
    std::int64_t n = 0, first = -1;
    while (auto b = ld.next()) {
      if (first < 0) first = b->idx[0];
      n += b->img.batch();
    }
    CHECK(n == 200);
    CHECK(first == 0);
  }
}

TEST_CASE("loader: a batch stays intact while later ones are gathered; a restarted epoch discards what was gathered ahead") {
  auto d = nitro::data::fashion_mnist({.valid = 100, .train_limit = 1000, .test_limit = 200});
  auto const& test = d.split("test");
  auto pixels_of = [&](std::int64_t sample) {
    return std::vector<float>(test.all().img.data() + 784 * sample, test.all().img.data() + 784 * (sample + 1));
  };
  for (int prefetch : {0, 1, 3}) {
    nitro::data::loader<nitro::data::image_batch> ld(test, {.batch_size = 16, .shuffle = true, .drop_last = true, .prefetch = prefetch, .seed = 4});
    ld.start_epoch(0);
    auto first = ld.next();
    REQUIRE(first);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker fills every free slot meanwhile
    for (std::int64_t i = 0; i < first->idx.numel(); ++i)
      CHECK(std::vector<float>(first->img.data() + 784 * i, first->img.data() + 784 * (i + 1)) == pixels_of(first->idx[i]));
    (void)ld.next();  // batches gathered ahead of an abandoned epoch must not leak into the next one
    ld.start_epoch(7, 2);
    nitro::data::loader<nitro::data::image_batch> fresh(test, {.batch_size = 16, .shuffle = true, .drop_last = true, .prefetch = prefetch, .seed = 4});
    fresh.start_epoch(7, 2);
    std::int64_t batches = 0;
    while (auto b = ld.next()) {
      auto f = fresh.next();
      REQUIRE(f);
      CHECK(std::vector<std::int64_t>(b->idx.data(), b->idx.data() + 16) == std::vector<std::int64_t>(f->idx.data(), f->idx.data() + 16));
      for (std::int64_t i = 0; i < 16; ++i)
        CHECK(std::vector<float>(b->img.data() + 784 * i, b->img.data() + 784 * (i + 1)) == pixels_of(b->idx[i]));
      ++batches;
    }
    CHECK(batches == 200 / 16 - 2);
    CHECK_FALSE(fresh.next());
  }
}

TEST_CASE("loader: parts of every batch, side by side, are the whole loader's batches (a data-parallel rank's shard)") {
  auto d = nitro::data::fashion_mnist({.valid = 100, .train_limit = 1000, .test_limit = 200});
  for (bool shuffle : {true, false}) {
    const nitro::data::loader_options whole{.batch_size = 64, .shuffle = shuffle, .drop_last = false, .prefetch = 1, .seed = 9};
    nitro::data::loader<nitro::data::image_batch> all(d.split("test"), whole);
    std::vector<std::unique_ptr<nitro::data::loader<nitro::data::image_batch>>> parts;
    for (int p = 0; p < 3; ++p) {
      auto o = whole;
      o.part = p;
      o.parts = 3;
      parts.push_back(std::make_unique<nitro::data::loader<nitro::data::image_batch>>(d.split("test"), o));
    }
    all.start_epoch(2, 1);  // mid-epoch, as a resume starts
    for (auto& p : parts) p->start_epoch(2, 1);
    std::int64_t k = 1;
    while (auto b = all.next()) {
      std::vector<std::int64_t> joined;
      std::vector<float> pixels;
      for (int p = 0; p < 3; ++p) {
        auto s = parts[static_cast<std::size_t>(p)]->next();
        REQUIRE(s);
        const auto cols = parts[static_cast<std::size_t>(p)]->columns(k);
        CHECK(s->idx.numel() == cols.count);
        for (std::int64_t i = 0; i < s->idx.numel(); ++i) joined.push_back(s->idx[i]);
        pixels.insert(pixels.end(), s->img.data(), s->img.data() + 784 * s->img.batch());
      }
      CHECK(joined == std::vector<std::int64_t>(b->idx.data(), b->idx.data() + b->idx.numel()));
      CHECK(pixels == std::vector<float>(b->img.data(), b->img.data() + 784 * b->img.batch()));
      ++k;
    }
    CHECK(k == 4);  // batches 1..3 of 200 / 64 (the last one 8 samples: parts of 2, 3, 3)
    for (auto& p : parts) CHECK_FALSE(p->next());
  }
  nitro::data::loader_options bad{.batch_size = 64};
  bad.part = 2;
  bad.parts = 2;
  CHECK_THROWS_WITH_AS(nitro::data::loader<nitro::data::image_batch>(d.split("test"), bad), doctest::Contains("E-DATA-009"), nitro::error);
}

// ---- text: byte windows from Debian's fortunes or a user's file ------------------------------------

namespace {
std::string window_text(nitro::Tensor const& t, std::int64_t w) {
  std::string s;
  for (std::int64_t i = 0; i < t.size(0); ++i) s.push_back(static_cast<char>(static_cast<int>(t(i, w))));
  return s;
}
}  // namespace

TEST_CASE("text: windows of seq + 1 bytes, targets one byte ahead, whole documents to one split") {
  const fs::path dir = nitro_test::tmp_dir("io") / "text";
  fs::create_directories(dir);
  // 40 paragraphs, each naming itself: documents 0, 20 go to test, 1, 21 to valid, the rest to train
  std::string all;
  for (int i = 0; i < 40; ++i) all += "paragraph " + std::to_string(i) + " says hello to the model.\n\n";
  const std::string file = (dir / "book.txt").string();
  std::ofstream(file, std::ios::binary) << all;
  const std::int64_t seq = 16;
  auto c = nitro::data::read_text_corpus({.file = file, .seq = seq});
  CHECK(c.test == "paragraph 0 says hello to the model.\n\nparagraph 20 says hello to the model.\n");
  CHECK(c.valid == "paragraph 1 says hello to the model.\n\nparagraph 21 says hello to the model.\n");
  CHECK(c.train.find("paragraph 2 says") == 0);
  CHECK(c.train.find("paragraph 20 ") == std::string::npos);
  CHECK(c.train.size() + c.valid.size() + c.test.size() == all.size() - 3);  // the joins replace the separators

  auto d = nitro::data::text_windows({.file = file, .seq = seq});
  auto const& train = d.split("train").all();
  REQUIRE(train.tokens.shape() == nitro::shape{seq, (std::int64_t(c.train.size()) - 1) / seq});
  for (std::int64_t w = 0; w < train.tokens.batch(); ++w) {
    CHECK(window_text(train.tokens, w) == c.train.substr(std::size_t(w * seq), std::size_t(seq)));
    CHECK(window_text(train.targets, w) == c.train.substr(std::size_t(w * seq + 1), std::size_t(seq)));
  }
  CHECK(d.has("valid"));
  CHECK(d.has("test"));
  CHECK(d.fingerprint.find(file) != std::string::npos);

  // the loader's rules: seeded order, resumable at any batch
  auto order_of = [&](std::int64_t first) {
    nitro::data::loader<nitro::data::text_batch> ld(d.split("train"), {.batch_size = 4, .shuffle = true, .drop_last = true, .prefetch = 2, .seed = 3});
    ld.start_epoch(0, first);
    std::vector<std::string> seen;
    while (auto b = ld.next())
      for (std::int64_t w = 0; w < b->tokens.batch(); ++w) seen.push_back(window_text(b->tokens, w));
    return seen;
  };
  auto whole = order_of(0), resumed = order_of(2);
  CHECK(std::vector<std::string>(whole.begin() + 8, whole.end()) == resumed);

  // bits per byte of the unigram baseline: a text of one repeated byte costs almost nothing under itself
  CHECK(nitro::data::unigram_bits_per_byte(std::string(1000, 'a'), "aaaa") < 0.5);
  CHECK(nitro::data::unigram_bits_per_byte(c.train, c.valid) > 2.0);
  CHECK(nitro::data::unigram_bits_per_byte(c.train, c.valid) < 8.0);
}

TEST_CASE("text: a missing, empty or too short file is a coded error naming the file and the knob") {
  const fs::path dir = nitro_test::tmp_dir("io") / "text_errors";
  fs::create_directories(dir);
  auto code_of = [](nitro::data::text_options o) {
    try {
      nitro::data::text_windows(o);
    } catch (nitro::error const& e) {
      CHECK(std::string(e.what()).find(o.file) != std::string::npos);
      CHECK(std::string(e.what()).find("knob corpus") != std::string::npos);
      return e.code();
    }
    return std::string("no error");
  };
  CHECK(code_of({.file = (dir / "absent.txt").string(), .seq = 8, .knob = "corpus"}) == "E-DATA-010");
  std::ofstream(dir / "empty.txt").close();
  CHECK(code_of({.file = (dir / "empty.txt").string(), .seq = 8, .knob = "corpus"}) == "E-DATA-011");
  std::ofstream(dir / "short.txt") << "12345678";  // 8 bytes: a window of seq 8 needs 9
  CHECK(code_of({.file = (dir / "short.txt").string(), .seq = 8, .knob = "corpus"}) == "E-DATA-012");
  std::ofstream(dir / "nine.txt") << "123456789";
  auto d = nitro::data::text_windows({.file = (dir / "nine.txt").string(), .seq = 8, .knob = "corpus"});
  CHECK(d.split("train").size() == 1);
  CHECK(!d.has("valid"));  // fewer than 20 documents: all of them train
}

TEST_CASE("text: a file that is not UTF-8 text is E-DATA-013 naming the file, the knob, the byte and its line; UTF-8 of every length is text") {
  const fs::path dir = nitro_test::tmp_dir("io") / "text_utf8";
  fs::create_directories(dir);
  auto message_of = [&](std::string const& name, std::string const& bytes) {
    nitro_test::spit(dir / name, bytes);
    try {
      nitro::data::text_windows({.file = (dir / name).string(), .seq = 4, .knob = "text"});
    } catch (nitro::error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string f = (dir / "latin1.txt").string();
  CHECK(message_of("latin1.txt", "caf\xe9 au lait\nna\xef" "ve\n") ==
        "E-DATA-013: the text file " + f + " (knob text) is not UTF-8 text: byte 3 (line 1, 0xe9) starts no UTF-8 character\n"
        "  fix: convert it to UTF-8 (iconv -f LATIN1 -t UTF-8 " + f + " > text.txt) and point the knob text at that, or at another text file");
  CHECK(message_of("binary.txt", std::string("line one\nline two\n\x7f" "ELF\0\0\x01", 25)).find("holds a NUL byte at byte 22 (line 3, 0x00): a binary file, not text") !=
        std::string::npos);
  // each malformed form, at the offset where it starts
  const std::pair<std::string, std::string> bad[] = {
      {"ab\x80" "cdefgh", "byte 2 "},                 // a continuation byte alone
      {"abcdefg\xc3", "byte 7 "},                     // cut short at the end
      {"ab\xc0\xaf" "cdefg", "byte 2 "},              // overlong '/'
      {"ab\xed\xa0\x80" "cdef", "byte 2 "},          // a surrogate, U+D800
      {"ab\xf4\x90\x80\x80" "cd", "byte 2 "},        // past U+10FFFF
      {"ab\xe2\x82zcdefg", "byte 2 "},                // a three-byte form broken in its third byte
  };
  for (auto const& form : bad) {  // not a structured binding: clang 14's INFO cannot capture one
    INFO(form.first);
    const std::string m = message_of("bad.txt", form.first);
    CHECK(m.rfind("E-DATA-013", 0) == 0);
    CHECK(m.find(form.second) != std::string::npos);
  }
  // two-, three- and four-byte characters are text, and every byte of them is a token
  const std::string good = "na\xc3\xafve \xe2\x9c\x93 \xf0\x9d\x84\x9e" " clef\n";
  CHECK(message_of("good.txt", good) == "no error");
}

TEST_CASE("text: Debian's fortunes are the default corpus, in English, cut into three splits") {
  auto d = nitro::data::text_windows({.seq = 64});
  CHECK(d.name == "fortunes");
  CHECK(d.split("train").size() > 20000);
  CHECK(d.split("valid").size() > 1000);
  CHECK(d.split("test").size() > 1000);
  auto c = nitro::data::read_text_corpus({.seq = 64});
  CHECK(c.train.find("-- Mark Twain") != std::string::npos);
  CHECK(c.train.find("\n%\n") == std::string::npos);  // the separators are gone
  const double unigram = nitro::data::unigram_bits_per_byte(c.train, c.valid);
  CHECK(unigram > 4.0);  // English bytes, one at a time
  CHECK(unigram < 5.5);
}
