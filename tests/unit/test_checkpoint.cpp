// record/: safetensors files (round trips, files other writers make, every kind of damage), atomic
// files (also under SIGKILL), the checkpointer's policy, index and recovery, averaging, and the
// weights/resume grammar resolved against a runs directory.
#include <nitro/record/atomic_file.hpp>
#include <nitro/record/checkpoint.hpp>
#include <nitro/record/run_lock.hpp>
#include <nitro/record/safetensors.hpp>
#include <nitro/record/weights_ref.hpp>
#include <nitro/record/weights_resolve.hpp>
#include <nitro/nn/layers/chain.hpp>
#include <nitro/nn/layers/dense.hpp>
#include <nitro/optim/param_store.hpp>
#include <nitro/train/keywords.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../support/nitro_test.hpp"

namespace fs = std::filesystem;

namespace ckpt_test {

fs::path fresh_dir(std::string const& name) {
  char const* t = std::getenv("NITRO_TEST_TMP");
  fs::path base = t ? fs::path(t) : fs::temp_directory_path() / "nitro-test";
  fs::path d = base / ("ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
using nitro_test::slurp;
using nitro_test::spit;
// A safetensors file by hand: the 8-byte length, the header text, the data.
std::string raw_file(std::string const& header, std::string const& data) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}
std::string floats(std::vector<float> const& v) { return std::string(reinterpret_cast<char const*>(v.data()), v.size() * sizeof(float)); }

// The code of the nitro::error `f` throws ("none" when it returns, "other" for another exception);
// `sentence` receives the error's sentence.
template <class F>
std::string code_of(F&& f, std::string* sentence = nullptr) {
  try {
    f();
  } catch (nitro::error const& e) {
    if (sentence) *sentence = e.sentence();
    return e.code();
  } catch (...) {
    return "other";
  }
  return "none";
}
std::string parse_code(std::string bytes, std::string* sentence = nullptr) {
  return code_of([&] { (void)nitro::safetensors_file::parse(std::move(bytes), "damaged.safetensors"); }, sentence);
}

// A small nitro file: F32 [3, 2] (nitro extents), F64 [4], I64 scalar-ish [2], U8 [5].
struct sample {
  std::vector<float> w{1, 2, 3, 4, 5, 6};
  std::vector<double> d{0.5, -1.25, 3e-300, 7};
  std::vector<std::int64_t> i{-3, 1ll << 40};
  std::vector<std::uint8_t> u{1, 2, 3, 4, 255};
  nitro::safetensors_writer writer() const {
    nitro::safetensors_writer w;
    w.add("params.w", this->w.data(), nitro::shape{3, 2});
    w.add("params.d", d.data(), nitro::shape{4});
    w.add("train.i", i.data(), nitro::shape{2});
    w.add("train.u", u.data(), nitro::shape{5});
    w.metadata("step", "12");
    return w;
  }
};

using model_t = decltype(nitro::nn::chain(nitro::nn::dense<4, 3>(nitro::nn::relu), nitro::nn::dense<3, 2>()));
using store_t = nitro::param_store<model_t::param_spec>;
using other_model_t = decltype(nitro::nn::chain(nitro::nn::dense<5, 3>(nitro::nn::relu), nitro::nn::dense<3, 2>()));
using other_store_t = nitro::param_store<other_model_t::param_spec>;

void fill(store_t& s, float base) {
  for (std::int64_t k = 0; k < store_t::size; ++k) s.values()[k] = base + 0.25f * static_cast<float>(k);
}
bool same_leaves(store_t const& a, store_t const& b) {
  for (auto const& li : store_t::leaves)
    if (std::memcmp(a.values() + li.offset, b.values() + li.offset, sizeof(float) * static_cast<std::size_t>(li.numel)) != 0) return false;
  return true;
}

}  // namespace ckpt_test

using namespace ckpt_test;

// ================================================================================ safetensors ==
TEST_CASE("safetensors: a written file reads back exactly, shapes reversed to C order, metadata kept") {
  sample s;
  auto w = s.writer();
  const std::string bytes = w.bytes();
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);  // the data starts 8-byte aligned
  CHECK(bytes[8] == '{');

  auto f = nitro::safetensors_file::parse(bytes, "mem");
  CHECK(f.is_nitro());
  CHECK(f.checksummed());
  REQUIRE(f.entries().size() == 4);
  auto const& e = f.at("params.w");
  CHECK(e.dtype == nitro::st_dtype::F32);
  CHECK(e.file_shape == std::vector<std::int64_t>{2, 3});
  CHECK(e.shape() == nitro::shape{3, 2});
  CHECK(f.values<float>(e) == s.w);
  CHECK(f.values<double>(f.at("params.d")) == s.d);
  CHECK(f.values<std::int64_t>(f.at("train.i")) == s.i);
  CHECK(f.values<std::uint8_t>(f.at("train.u")) == s.u);
  CHECK(*f.meta("step") == "12");
  CHECK(*f.meta("format") == "nitro.tensors");
  // 8-byte tensors first, so each tensor starts aligned to its element size
  CHECK(f.entries()[0].dtype == nitro::st_dtype::F64);
  for (auto const& x : f.entries()) CHECK(x.begin % nitro::size_of(x.dtype) == 0);

  // copies and moves read their own bytes, whatever happens to the original
  std::optional<nitro::safetensors_file> original(nitro::safetensors_file::parse(bytes, "mem"));
  nitro::safetensors_file copied = *original;
  nitro::safetensors_file assigned = nitro::safetensors_file::parse(raw_file("{}", ""), "empty");
  assigned = *original;
  original.reset();
  CHECK(copied.values<float>(copied.at("params.w")) == s.w);
  CHECK(assigned.values<std::uint8_t>(assigned.at("train.u")) == s.u);
  nitro::safetensors_file moved = std::move(copied);
  CHECK(moved.values<double>(moved.at("params.d")) == s.d);

  auto dir = fresh_dir("roundtrip");
  w.write(dir / "a.safetensors");
  CHECK(slurp(dir / "a.safetensors") == bytes);
  auto g = nitro::safetensors_file::read(dir / "a.safetensors");
  CHECK(g.values<float>(g.at("params.w")) == s.w);
  CHECK(g.source() == (dir / "a.safetensors").string());
}

TEST_CASE("safetensors: files from other writers (no checksums, F16/BF16, padding) are read and converted") {
  // what the Python package writes for {"a": float16 [2], "b": bfloat16 [1, 2], "c": float32 []}
  const std::uint16_t h[2] = {0x3c00, 0xc000};       // 1.0, -2.0 (F16)
  const std::uint16_t bf[2] = {0x3f80, 0x4049};      // 1.0, 3.140625 (BF16)
  const float c = 0.5f;
  std::string data(reinterpret_cast<char const*>(h), 4);
  data += std::string(reinterpret_cast<char const*>(bf), 4);
  data += std::string(reinterpret_cast<char const*>(&c), 4);
  std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},"c":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})";
  while (header.size() % 8) header += ' ';
  auto f = nitro::safetensors_file::parse(raw_file(header, data), "pt.safetensors");
  CHECK_FALSE(f.is_nitro());
  CHECK_FALSE(f.checksummed());
  CHECK(f.values<float>(f.at("a")) == std::vector<float>{1.0f, -2.0f});
  CHECK(f.values<float>(f.at("b")) == std::vector<float>{1.0f, 3.140625f});
  CHECK(f.at("c").numel() == 1);
  CHECK(f.at("c").shape().rank() == 0);
  CHECK(f.values<double>(f.at("c")) == std::vector<double>{0.5});
  // an empty file of tensors is valid too
  auto empty = nitro::safetensors_file::parse(raw_file("{}      ", ""), "empty");
  CHECK(empty.entries().empty());
}

TEST_CASE("safetensors: loading converts floats, refuses integers into floats and wrong counts") {
  sample s;
  auto f = nitro::safetensors_file::parse(s.writer().bytes(), "mem.safetensors");
  std::vector<float> dst(4);
  f.copy_to(f.at("params.d"), dst.data(), 4);  // F64 -> F32
  CHECK(dst[1] == -1.25f);
  std::string what;
  CHECK(code_of([&] { f.copy_to(f.at("train.i"), dst.data(), 2); }, &what) == "E-CKPT-013");
  CHECK(what.find("I64") != std::string::npos);
  CHECK(code_of([&] { f.copy_to(f.at("params.w"), dst.data(), 4); }) == "E-CKPT-012");
  CHECK(code_of([&] { (void)f.at("params.nope"); }, &what) == "E-CKPT-011");
  CHECK(what.find("params.w") != std::string::npos);  // the message lists what the file has
}

TEST_CASE("safetensors: the writer refuses duplicate names, reserved keys and foreign formats") {
  float x = 1;
  nitro::safetensors_writer w;
  w.add("a", &x, nitro::shape{1});
  CHECK(code_of([&] { w.add("a", &x, nitro::shape{1}); }) == "E-CKPT-016");
  CHECK(code_of([&] { w.add("__metadata__", &x, nitro::shape{1}); }) == "E-CKPT-016");
  CHECK(code_of([&] { w.add("", &x, nitro::shape{1}); }) == "E-CKPT-016");
  CHECK(code_of([&] { w.metadata("crc32.tensors", "x"); }) == "E-CKPT-016");
  CHECK(code_of([&] { w.metadata("format", "pt"); }) == "E-CKPT-016");
}

TEST_CASE("safetensors: every kind of damage is a coded error naming the file") {
  std::string what;
  const std::string one = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string two_floats = floats({1, 2});
  CHECK(parse_code(raw_file(one, two_floats)) == "none");  // the undamaged twin

  SUBCASE("shorter than the header length") {
    CHECK(parse_code("", &what) == "E-CKPT-002");
    CHECK(parse_code("\x05\0\0", &what) == "E-CKPT-002");
    CHECK(what.find("damaged.safetensors") != std::string::npos);
  }
  SUBCASE("impossible header lengths") {
    std::string f = raw_file(one, two_floats);
    std::string zero = f;
    std::memset(zero.data(), 0, 8);
    CHECK(parse_code(zero) == "E-CKPT-003");
    std::string huge = f;
    huge[5] = 0x10;  // 2^44
    CHECK(parse_code(huge, &what) == "E-CKPT-003");
    CHECK(what.find("limit") != std::string::npos);
    std::string beyond = f;
    beyond[0] = static_cast<char>(one.size() + 9);
    CHECK(parse_code(beyond, &what) == "E-CKPT-003");
    CHECK(what.find("truncated") != std::string::npos);
  }
  SUBCASE("headers that are not a JSON object") {
    CHECK(parse_code(raw_file(R"({"t": nope})", "")) == "E-CKPT-004");
    CHECK(parse_code(raw_file(R"([1, 2])", "")) == "E-CKPT-004");
    CHECK(parse_code(raw_file(R"( {})", "")) == "E-CKPT-004");
    CHECK(parse_code(raw_file(std::string("{}\0\0", 4), "")) == "E-CKPT-004");
    CHECK(parse_code(raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two_floats), &what) == "E-CKPT-004");
    CHECK(what.find("'t' twice") != std::string::npos);
    CHECK(parse_code(raw_file(R"({"t":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})", two_floats)) == "E-CKPT-004");
    CHECK(parse_code(raw_file("{\"t\xff\":1}", "")) == "E-CKPT-004");  // not UTF-8
  }
  SUBCASE("malformed entries") {
    auto entry = [&](std::string const& body) { return parse_code(raw_file(R"({"t":)" + body + "}", two_floats), &what); };
    CHECK(entry(R"({"shape":[2],"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F8","shape":[2],"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(what.find("'F8'") != std::string::npos);
    CHECK(entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})") == "E-CKPT-005");
    CHECK(entry(R"([1])") == "E-CKPT-005");
    CHECK(entry(R"({"dtype":"F32","shape":[4611686018427387904, 4611686018427387904],"data_offsets":[0,8]})") == "E-CKPT-005");
    CHECK(parse_code(raw_file(R"({"__metadata__":{"step":12}})", "")) == "E-CKPT-005");
    CHECK(parse_code(raw_file(R"({"__metadata__":[]})", "")) == "E-CKPT-005");
  }
  SUBCASE("dtype and shape that do not match the byte count") {
    CHECK(parse_code(raw_file(R"({"t":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", two_floats), &what) == "E-CKPT-007");
    CHECK(what.find("16 bytes") != std::string::npos);
    CHECK(parse_code(raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two_floats)) == "E-CKPT-007");
  }
  SUBCASE("offsets: reversed, overlapping, with a gap, out of range, not covering the data") {
    const std::string four = floats({1, 2, 3, 4});
    CHECK(parse_code(raw_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", four)) == "E-CKPT-006");
    CHECK(parse_code(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four), &what) == "E-CKPT-006");
    CHECK(what.find("overlaps") != std::string::npos);
    CHECK(parse_code(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four), &what) == "E-CKPT-006");
    CHECK(what.find("no tensor") != std::string::npos);
    CHECK(parse_code(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[64,72]}})", four), &what) == "E-CKPT-006");
    CHECK(what.find("outside") != std::string::npos);
    CHECK(parse_code(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four), &what) == "E-CKPT-006");
    CHECK(what.find("after the last tensor") != std::string::npos);
  }
  SUBCASE("truncation") {
    CHECK(parse_code(raw_file(one, two_floats.substr(0, 5)), &what) == "E-CKPT-009");
    CHECK(what.find("truncated") != std::string::npos);
    sample s;
    const std::string good = s.writer().bytes();
    CHECK(parse_code(good.substr(0, good.size() - 3)) == "E-CKPT-009");
  }
  SUBCASE("checksums") {
    sample s;
    const std::string good = s.writer().bytes();
    auto f = nitro::safetensors_file::parse(good, "x");
    std::string bad = good;
    const std::size_t at = static_cast<std::size_t>(good.size() - 1);  // the last byte: inside train.u
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    CHECK(parse_code(bad, &what) == "E-CKPT-008");
    CHECK(what.find("train.u") != std::string::npos);
    std::string edited = good;
    auto p = edited.find("\"step\":\"12\"");
    REQUIRE(p != std::string::npos);
    edited[p + 9] = '3';  // step 13: valid JSON, same length
    CHECK(parse_code(edited, &what) == "E-CKPT-008");
    CHECK(what.find("header") != std::string::npos);
    std::string no_crc = good;
    auto q = no_crc.find("crc32.header");
    no_crc.replace(q, 12, "crc32.hexder");
    CHECK(parse_code(no_crc) == "E-CKPT-008");
  }
  SUBCASE("files that are not there") {
    auto dir = fresh_dir("missing");
    CHECK(code_of([&] { (void)nitro::safetensors_file::read(dir / "nope.safetensors"); }, &what) == "E-CKPT-001");
    CHECK(what.find("nope.safetensors") != std::string::npos);
    CHECK(code_of([&] { (void)nitro::safetensors_file::read(dir); }) == "E-CKPT-001");
  }
}

TEST_CASE("safetensors: no truncation and no single flipped byte of a nitro file goes unnoticed") {
  sample s;
  const std::string good = s.writer().bytes();
  int failures = 0;
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::string c = parse_code(good.substr(0, n));
    if (c.rfind("E-CKPT-00", 0) != 0) { ++failures; MESSAGE("truncated to " << n << " bytes: " << c); }
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      const std::string c = parse_code(bad);
      if (c.rfind("E-CKPT-00", 0) != 0) { ++failures; MESSAGE("byte " << i << " ^ " << int(mask) << ": " << c); }
    }
  }
  CHECK(failures == 0);
}

// ================================================================================ atomic files ==
TEST_CASE("atomic_file: the target changes only at commit, and an abandoned write leaves no trace") {
  auto dir = fresh_dir("atomic");
  nitro::atomic_write(dir / "x.txt", "first");
  CHECK(slurp(dir / "x.txt") == "first");
  {
    nitro::atomic_file f(dir / "x.txt");
    f.write("second, longer");
    CHECK(slurp(dir / "x.txt") == "first");  // not yet
    CHECK(fs::exists(f.temporary()));
    f.commit();
  }
  CHECK(slurp(dir / "x.txt") == "second, longer");
  fs::path temp;
  {
    nitro::atomic_file f(dir / "x.txt");
    f.write("abandoned");
    temp = f.temporary();
  }
  CHECK(slurp(dir / "x.txt") == "second, longer");
  CHECK_FALSE(fs::exists(temp));
  CHECK(fs::directory_iterator(dir) != fs::directory_iterator());
  int files = 0;
  for (auto const& e : fs::directory_iterator(dir)) { (void)e; ++files; }
  CHECK(files == 1);

  std::string what;
  CHECK(code_of([&] { nitro::atomic_write(dir / "no" / "such" / "dir.txt", "x"); }, &what) == "E-REC-001");
  CHECK(what.find("dir.txt") != std::string::npos);

  spit(dir / ".y.tmp.123.0", "left by a killed writer");
  CHECK(nitro::remove_stale_temporaries(dir) == 1);
  CHECK_FALSE(fs::exists(dir / ".y.tmp.123.0"));
}

TEST_CASE("atomic_file: a writer killed with SIGKILL at random moments leaves the old or the new file, whole") {
  auto dir = fresh_dir("atomic-kill");
  const fs::path target = dir / "big.bin";
  // version v: 2 MiB of bytes derived from v, then v itself; whole iff the bytes match v
  auto content = [](std::uint32_t v) {
    std::string s(2u << 20, '\0');
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 131u + v * 7u) & 0xff);
    s.append(reinterpret_cast<char const*>(&v), 4);
    return s;
  };
  nitro::atomic_write(target, content(0));
  std::mt19937 gen(7);
  int kills = 0;
  std::uint32_t newest = 0;
  for (int round = 0; round < 8; ++round) {
    const std::uint32_t first = 1000u * static_cast<std::uint32_t>(round + 1);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the writer: new versions until killed
      for (std::uint32_t v = first;; ++v) nitro::atomic_write(target, content(v));
    }
    // wait for the writer to replace the file once (however slow fsync is here), then kill it at
    // a random moment of the writes that follow
    auto inode = [&] { struct stat st{}; return ::stat(target.c_str(), &st) == 0 ? st.st_ino : ino_t(0); };
    const ino_t before = inode();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (inode() == before && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(gen() % 30000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    kills += WIFSIGNALED(status) ? 1 : 0;
    const std::string now = slurp(target);
    REQUIRE(now.size() == (2u << 20) + 4);
    std::uint32_t v;
    std::memcpy(&v, now.data() + now.size() - 4, 4);
    CHECK(now == content(v));               // whole
    CHECK((v == newest || v >= first));     // the old one, or one this writer finished
    newest = v;
  }
  CHECK(kills == 8);
  CHECK(newest > 0);  // the writers did replace the file
  fs::remove_all(dir);
}

// ============================================================================== stores, info ==
TEST_CASE("checkpoint tensors: a model's leaves go out by keypath and come back all or nothing") {
  store_t a;
  fill(a, 1.0f);
  nitro::safetensors_writer w;
  nitro::add_store(w, "params.", a);
  auto f = nitro::safetensors_file::parse(w.bytes(), "ck.safetensors");
  CHECK(f.contains("params.layer_1.weight"));
  CHECK(f.at("params.layer_1.weight").file_shape == std::vector<std::int64_t>{4, 3});  // nitro [3, 4] (out, in)

  store_t b;
  fill(b, -5.0f);
  nitro::load_store(f, "params.", b);
  for (auto const& li : store_t::leaves)
    CHECK(std::memcmp(a.values() + li.offset, b.values() + li.offset, sizeof(float) * static_cast<std::size_t>(li.numel)) == 0);

  std::string what;
  other_store_t other;  // dense<5, 3> first: a different shape
  const std::vector<float> before(other.values(), other.values() + other_store_t::size);
  CHECK(code_of([&] { nitro::load_store(f, "params.", other); }, &what) == "E-CKPT-012");
  CHECK(what.find("layer_1.weight") != std::string::npos);
  CHECK(std::vector<float>(other.values(), other.values() + other_store_t::size) == before);  // untouched

  nitro::safetensors_writer extra;
  nitro::add_store(extra, "params.", a);
  float stray = 3;
  extra.add("params.layer_9.weight", &stray, nitro::shape{1});
  CHECK(code_of([&] { nitro::load_store(nitro::safetensors_file::parse(extra.bytes(), "x"), "params.", b); }) == "E-CKPT-014");
  CHECK(code_of([&] { nitro::load_store(f, "ema.", b); }) == "E-CKPT-011");
}

TEST_CASE("checkpoint tensors: load_model takes nitro's params./state. keys or a foreign file's bare keypaths") {
  using empty_t = nitro::param_store<nitro::tree<>>;
  store_t a;
  fill(a, 2.0f);
  empty_t no_state(false);
  nitro::safetensors_writer nitro_file;
  nitro::add_store(nitro_file, "params.", a);
  store_t b;
  nitro::load_model(nitro::safetensors_file::parse(nitro_file.bytes(), "n"), b, no_state);
  CHECK(same_leaves(a, b));

  // as a PyTorch user would name them: "layer_1.weight", ... (no prefix, no nitro metadata)
  std::string header = "{";
  std::string data;
  std::uint64_t at = 0;
  for (auto const& li : store_t::leaves) {
    std::string shape = "[";
    for (int d = li.rank - 1; d >= 0; --d) shape += std::to_string(li.dims[static_cast<std::size_t>(d)]) + (d ? "," : "");
    header += (at ? "," : "") + ("\"" + std::string(li.keypath) + "\":{\"dtype\":\"F32\",\"shape\":" + shape + "],\"data_offsets\":[" +
                                 std::to_string(at) + "," + std::to_string(at + 4 * li.numel) + "]}");
    data.append(reinterpret_cast<char const*>(a.values() + li.offset), static_cast<std::size_t>(4 * li.numel));
    at += static_cast<std::uint64_t>(4 * li.numel);
  }
  header += "}";
  store_t c;
  nitro::load_model(nitro::safetensors_file::parse(raw_file(header, data), "torch.safetensors"), c, no_state);
  CHECK(same_leaves(a, c));

  std::string extra_header = header.substr(0, header.size() - 1) + ",\"head.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
                             std::to_string(at) + "," + std::to_string(at + 4) + "]}}";
  std::string what;
  CHECK(code_of([&] { nitro::load_model(nitro::safetensors_file::parse(raw_file(extra_header, data + floats({1})), "t"), c, no_state); }, &what) == "E-CKPT-014");
  CHECK(what.find("head.weight") != std::string::npos);
}

TEST_CASE("checkpoint info: position, seed, metrics and records survive the file; foreign files are refused") {
  nitro::checkpoint_info info{.step = 1234, .epoch = 3, .batch_in_epoch = 17, .seed = 18446744073709551557ull,
                              .metrics = {{"valid.loss", 0.1 + 0.2}, {"valid.acc", std::nan("")}},
                              .selection = {{"experiment", "fashion_mlp"}, {"set", {{"lr", 0.002}}}},
                              .groups = {{"default", {{"leaves", 4}}}},
                              .extra = {{"schedule_step", 1234}}};
  info.seq = 9;
  nitro::safetensors_writer w;
  nitro::write_checkpoint_metadata(w, info);
  auto f = nitro::safetensors_file::parse(w.bytes(), "ck");
  auto back = nitro::read_checkpoint_info(f);
  CHECK(back.step == 1234);
  CHECK(back.epoch == 3);
  CHECK(back.batch_in_epoch == 17);
  CHECK(back.seed == 18446744073709551557ull);
  CHECK(back.seq == 9);
  CHECK(back.metrics.at("valid.loss") == 0.1 + 0.2);  // bit for bit
  CHECK(std::isnan(back.metrics.at("valid.acc")));
  CHECK(back.selection == info.selection);
  CHECK(back.groups == info.groups);
  CHECK(back.extra == info.extra);

  sample s;
  std::string what;
  CHECK(code_of([&] { (void)nitro::read_checkpoint_info(nitro::safetensors_file::parse(s.writer().bytes(), "t")); }, &what) == "E-CKPT-015");
  nitro::safetensors_writer newer;
  nitro::write_checkpoint_metadata(newer, info);
  newer.metadata("format_version", "2");
  CHECK(code_of([&] { (void)nitro::read_checkpoint_info(nitro::safetensors_file::parse(newer.bytes(), "t")); }, &what) == "E-CKPT-015");
  CHECK(what.find("version 2") != std::string::npos);
  nitro::safetensors_writer garbled;
  nitro::write_checkpoint_metadata(garbled, info);
  garbled.metadata("step", "12x");
  CHECK(code_of([&] { (void)nitro::read_checkpoint_info(nitro::safetensors_file::parse(garbled.bytes(), "t")); }) == "E-CKPT-015");
}

// =============================================================================== checkpointer ==
namespace ckpt_test {
// Saves a checkpoint whose single tensor holds `value`, with valid.loss = loss.
nitro::checkpoint_entry save(nitro::checkpointer& ck, std::int64_t step, double loss, float value = 0) {
  std::vector<float> v(3, value == 0 ? static_cast<float>(step) : value);
  nitro::safetensors_writer w;
  w.add("params.w", v.data(), nitro::shape{3});
  return ck.save(w, {.step = step, .epoch = step / 10, .seed = 5, .metrics = {{"valid.loss", loss}}});
}
std::vector<std::int64_t> steps_of(std::vector<nitro::checkpoint_entry> const& es) {
  std::vector<std::int64_t> r;
  for (auto const& e : es) r.push_back(e.step);
  return r;
}
std::vector<std::string> files_in(fs::path const& d) {
  std::vector<std::string> r;
  for (auto const& e : fs::directory_iterator(d)) r.push_back(e.path().filename().string());
  std::sort(r.begin(), r.end());
  return r;
}
}  // namespace ckpt_test

TEST_CASE("checkpointer: the policy is checked, and says when a checkpoint is due") {
  auto dir = fresh_dir("policy");
  std::string what;
  CHECK(code_of([&] { nitro::checkpointer(dir, {.every = nitro::every_steps(0)}); }) == "E-CKPT-017");
  CHECK(code_of([&] { nitro::checkpointer(dir, {.keep_last = 0}); }, &what) == "E-CKPT-017");
  CHECK(what.find("resume") != std::string::npos);
  CHECK(code_of([&] { nitro::checkpointer(dir, {.keep_best = 2}); }, &what) == "E-CKPT-017");
  CHECK(what.find("monitor") != std::string::npos);

  nitro::checkpointer by_steps(dir / "a", {.every = nitro::every_steps(50)});
  CHECK_FALSE(by_steps.due_after_step(0));
  CHECK_FALSE(by_steps.due_after_step(49));
  CHECK(by_steps.due_after_step(50));
  CHECK(by_steps.due_after_step(100));
  CHECK_FALSE(by_steps.due_after_epoch(1));
  nitro::checkpointer by_epochs(dir / "b", {.every = nitro::every_epochs(2)});
  CHECK_FALSE(by_epochs.due_after_epoch(1));
  CHECK(by_epochs.due_after_epoch(2));
  CHECK_FALSE(by_epochs.due_after_step(2));
}

TEST_CASE("checkpointer: retention keeps Last(k) and Best(k) by the monitor; the index lists them") {
  auto dir = fresh_dir("retention");
  {
    nitro::checkpointer ck(dir, {.every = nitro::every_steps(10), .keep_last = 2, .keep_best = 1, .monitor = "valid.loss"});
    const double losses[] = {0.5, 0.3, 0.4, 0.6, 0.7};
    for (int i = 0; i < 5; ++i) save(ck, 10 * (i + 1), losses[i]);
    CHECK(steps_of(ck.index().entries) == std::vector<std::int64_t>{20, 40, 50});
    CHECK(steps_of(ck.index().best(1)) == std::vector<std::int64_t>{20});
    CHECK(steps_of(ck.index().last(2)) == std::vector<std::int64_t>{50, 40});
    CHECK(files_in(dir) == std::vector<std::string>{"index.json", "step-000000000020.safetensors", "step-000000000040.safetensors",
                                                     "step-000000000050.safetensors"});
    std::string what;
    nitro::safetensors_writer w;
    CHECK(code_of([&] { ck.save(w, {.step = 60, .metrics = {{"valid.acc", 0.9}}}); }, &what) == "E-CKPT-019");
    CHECK(what.find("valid.acc") != std::string::npos);
  }
  {  // a checkpoint before any evaluation carries no metrics: it is kept as the latest, never as the best
    auto plain = dir / "no-metrics";
    nitro::checkpointer ck(plain, {.every = nitro::every_steps(1), .keep_last = 1, .keep_best = 1, .monitor = "valid.loss"});
    save(ck, 1, 0.9);
    nitro::safetensors_writer w;
    ck.save(w, {.step = 2});
    CHECK(steps_of(ck.index().entries) == std::vector<std::int64_t>{1, 2});
    CHECK(steps_of(ck.index().best(1)) == std::vector<std::int64_t>{1});
  }
  auto j = nlohmann::json::parse(slurp(dir / "index.json"));
  CHECK(j["format"] == "nitro.checkpoint-index");
  CHECK(j["monitor"] == "valid.loss");
  REQUIRE(j["checkpoints"].size() == 3);
  CHECK(j["checkpoints"][0]["step"] == 20);
  CHECK(j["checkpoints"][0]["epoch"] == 2);
  CHECK(j["checkpoints"][0]["metrics"]["valid.loss"] == 0.3);
  // every file is a checkpoint that knows its place
  auto info = nitro::read_checkpoint_info(nitro::safetensors_file::read(dir / "step-000000000050.safetensors"));
  CHECK(info.step == 50);
  CHECK(info.seq == 5);

  // reopened (a resumed run): the index is read back; max mode ranks the other way
  nitro::checkpointer again(dir, {.every = nitro::every_steps(10), .keep_last = 1, .keep_best = 1, .monitor = "valid.loss", .mode = nitro::monitor_mode::max});
  save(again, 60, 0.1);
  CHECK(steps_of(again.index().entries) == std::vector<std::int64_t>{50, 60});  // best by max: 50 (0.7); last: 60
}

TEST_CASE("checkpointer: a run killed between writes is recovered on reopening") {
  auto dir = fresh_dir("recover");
  nitro::checkpointer ck(dir, {.every = nitro::every_steps(1), .keep_last = 2});
  save(ck, 1, 0.5);
  save(ck, 2, 0.4);
  // the process wrote step 3's file, then died before the index: the file is adopted
  std::vector<float> v(3, 3.0f);
  nitro::safetensors_writer w;
  w.add("params.w", v.data(), nitro::shape{3});
  nitro::checkpoint_info info{.step = 3, .epoch = 0, .seed = 5};
  info.seq = ck.index().next_seq;
  nitro::write_checkpoint_metadata(w, info);
  w.write(dir / "step-000000000003.safetensors");
  // a checkpoint pruned from the index but not yet deleted, and a torn temporary
  fs::copy_file(dir / "step-000000000001.safetensors", dir / "step-000000000000.safetensors");
  spit(dir / ".step-000000000004.safetensors.tmp.99.1", "torn");
  nitro::checkpointer reopened(dir, {.every = nitro::every_steps(1), .keep_last = 2});
  CHECK(steps_of(reopened.index().entries) == std::vector<std::int64_t>{2, 3});
  CHECK(files_in(dir) == std::vector<std::string>{"index.json", "step-000000000002.safetensors", "step-000000000003.safetensors"});
  // a checkpoint of a step already there replaces it
  save(reopened, 3, 0.2, 9.0f);
  CHECK(steps_of(reopened.index().entries) == std::vector<std::int64_t>{2, 3});
  auto f = nitro::safetensors_file::read(dir / "step-000000000003.safetensors");
  CHECK(f.values<float>(f.at("params.w"))[0] == 9.0f);

  spit(dir / "index.json", "{\"format\": \"nitro.checkpoint-index\", \"version\": 1}");
  std::string what;
  CHECK(code_of([&] { nitro::checkpointer(dir, {}); }, &what) == "E-CKPT-018");
  CHECK(what.find("index.json") != std::string::npos);
  spit(dir / "index.json", "not json");
  CHECK(code_of([&] { nitro::checkpointer(dir, {}); }) == "E-CKPT-018");
}

TEST_CASE("average_checkpoints: the mean of floating tensors; integers must agree; shapes must match") {
  auto dir = fresh_dir("average");
  std::vector<fs::path> files;
  const std::vector<std::int64_t> counts{7, 8};
  for (int k = 0; k < 3; ++k) {
    std::vector<float> p{1.0f * k, 2.0f * k, 0.1f};
    std::vector<double> q{1.0 / (k + 1)};
    nitro::safetensors_writer w;
    w.add("params.p", p.data(), nitro::shape{3});
    w.add("state.q", q.data(), nitro::shape{1});
    w.add("state.n", counts.data(), nitro::shape{2});
    w.add("optim.m", p.data(), nitro::shape{3});  // not averaged: not a weight
    files.push_back(dir / ("c" + std::to_string(k) + ".safetensors"));
    w.write(files.back());
  }
  auto avg = nitro::average_checkpoints(files);
  CHECK(avg.values<float>(avg.at("params.p")) == std::vector<float>{1.0f, 2.0f, static_cast<float>((0.1 + 0.1 + 0.1) / 3 * 1.0)});
  CHECK(avg.values<float>(avg.at("params.p"))[2] == static_cast<float>((double(0.1f) * 3) / 3));
  CHECK(avg.values<double>(avg.at("state.q"))[0] == (1.0 + 0.5 + 1.0 / 3) / 3);
  CHECK(avg.values<std::int64_t>(avg.at("state.n")) == counts);
  CHECK_FALSE(avg.contains("optim.m"));
  CHECK(*avg.meta("format") == "nitro.average");

  std::vector<float> wide{1, 2, 3, 4};
  nitro::safetensors_writer w;
  w.add("params.p", wide.data(), nitro::shape{4});
  w.add("state.q", wide.data(), nitro::shape{1});
  w.add("state.n", counts.data(), nitro::shape{2});
  w.write(dir / "wide.safetensors");
  std::string what;
  CHECK(code_of([&] { (void)nitro::average_checkpoints({files[0], dir / "wide.safetensors"}); }, &what) == "E-CKPT-028");
  CHECK(what.find("params.p") != std::string::npos);
  CHECK(code_of([&] { (void)nitro::average_checkpoints({}); }) == "E-CKPT-024");
}

// ==================================================================================== grammar ==
namespace ckpt_test {
// keyword objects as values (nitro::ema, nitro::weights have the same shape: a static name)
struct ema_keyword { static constexpr nitro::fixed_string name{"ema"}; };
struct weights_keyword { static constexpr nitro::fixed_string name{"weights"}; };
struct other_handle {  // anything with run_directory() names a run
  fs::path dir;
  fs::path run_directory() const { return dir; }
};
// Two runs under `runs`: "mlp-a-001" (older; losses 0.5, 0.2, 0.4 at steps 10, 20, 30) and
// "mlp-b-002" (newer; 0.3, 0.35 at steps 5, 10), each keeping everything.
fs::path two_runs(std::string const& name) {
  auto runs = fresh_dir(name);
  {
    nitro::checkpointer a(runs / "mlp-a-001" / "checkpoints", {.every = nitro::every_steps(10), .keep_last = -1, .keep_best = -1, .monitor = "valid.loss"});
    save(a, 10, 0.5);
    save(a, 20, 0.2);
    save(a, 30, 0.4);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    nitro::checkpointer b(runs / "mlp-b-002" / "checkpoints", {.every = nitro::every_steps(5), .keep_last = -1, .keep_best = -1, .monitor = "valid.loss"});
    save(b, 5, 0.3);
    save(b, 10, 0.35);
  }
  fs::create_directories(runs / "mlp-c-003");  // a run that has no checkpoints yet
  return runs;
}
std::vector<std::string> picked(nitro::resolved_weights const& r) {
  std::vector<std::string> v;
  for (auto const& c : r.checkpoints) v.push_back(c.run.filename().string() + "@" + std::to_string(c.entry.step));
  return v;
}
}  // namespace ckpt_test

TEST_CASE("grammar as text (the command line's): every form parses to the value the C++ spelling makes") {
  using W = nitro::weights_ref;
  CHECK(W::from_text("m.safetensors").to_string() == "\"m.safetensors\"");
  CHECK(W::from_text("runs/x/checkpoints/step-000000000004.safetensors").which() == W::kind::path);
  CHECK(W::from_text("best").to_string() == "Best(1)");
  CHECK(W::from_text(" latest ").to_string() == "Last(1)");
  CHECK(W::from_text("Best(3)").to_string() == "Best(3)");
  CHECK(W::from_text("Average(Last(10))").to_string() == "Average(Last(10))");
  CHECK(W::from_text("Average( Best(2) )").averages());
  CHECK(W::from_text("latest >> Average(Last(10))").to_string() == "latest >> Average(Last(10))");
  CHECK(W::from_text("all>>best").to_string() == "all >> Best(1)");
  CHECK(W::from_text("fashion_mlp-small-7f3a >> Last(2)").to_string() == "run_id(\"fashion_mlp-small-7f3a\") >> Last(2)");
  CHECK(W::from_text("best").in_run_directory("/r/x").to_string() == "run(/r/x) >> Best(1)");
  CHECK(W::from_text("all >> best").in_run_directory("/r/x").to_string() == "all >> Best(1)");  // a named run stays
  CHECK(nitro::resume_ref::from_text("latest >> latest").to_string() == "latest >> Last(1)");
  std::string what;
  CHECK(code_of([] { (void)W::from_text("Best(x)"); }, &what) == "E-CKPT-033");
  CHECK(what.find("takes a count") != std::string::npos);
  CHECK(code_of([] { (void)W::from_text("Average(latest)"); }) == "E-CKPT-033");
  CHECK(code_of([] { (void)W::from_text("latest >> nonsense"); }) == "E-CKPT-033");
  CHECK(code_of([] { (void)W::from_text(">> best"); }) == "E-CKPT-033");
  CHECK(code_of([] { (void)W::from_text("  "); }) == "E-CKPT-033");
  CHECK(code_of([] { (void)W::from_text("Last(0)"); }) == "E-CKPT-025");
  CHECK(code_of([] { (void)nitro::resume_ref::from_text("Average(Last(3))"); }) == "E-CKPT-034");
}

TEST_CASE("grammar: every form reads as written") {
  using nitro::Average, nitro::Best, nitro::Last;
  CHECK(nitro::weights_ref("m.safetensors").to_string() == "\"m.safetensors\"");
  CHECK(nitro::weights_ref(nitro::latest >> nitro::best).to_string() == "latest >> Best(1)");
  CHECK(nitro::weights_ref(nitro::latest >> nitro::latest).to_string() == "latest >> Last(1)");
  CHECK(nitro::weights_ref(nitro::run_id("abc") >> Best(3)).to_string() == "run_id(\"abc\") >> Best(3)");
  CHECK(nitro::weights_ref(nitro::all >> Last(2)).to_string() == "all >> Last(2)");
  CHECK(nitro::weights_ref(nitro::latest >> Average(Last(10))).to_string() == "latest >> Average(Last(10))");
  CHECK(nitro::weights_ref(Average(Best(3))).to_string() == "Average(Best(3))");
  CHECK(nitro::weights_ref(other_handle{"/r/x"} >> nitro::best).to_string() == "run(/r/x) >> Best(1)");
  CHECK(nitro::weights_ref(Average(Last(4))).averages());
  CHECK(nitro::to_resume_ref(nitro::latest >> nitro::latest).to_string() == "latest >> Last(1)");
  CHECK(nitro::to_resume_ref(std::string("x.safetensors")).ref().which() == nitro::weights_ref::kind::path);
  CHECK(nitro::to_weights_ref("y.safetensors").path() == "y.safetensors");
  std::string what;
  CHECK(code_of([] { (void)Best(0); }, &what) == "E-CKPT-025");
  CHECK(code_of([] { (void)Last(-2); }) == "E-CKPT-025");
  CHECK(code_of([] { (void)nitro::run_id(""); }) == "E-CKPT-021");

  // restore_best, eval_weights, w0
  CHECK_FALSE(nitro::to_restore_ref(false).has_value());
  CHECK(nitro::to_restore_ref(true)->to_string() == "Best(1)");
  CHECK(nitro::to_restore_ref(Average(Last(10)))->to_string() == "Average(Last(10))");
  CHECK(nitro::to_eval_weights_ref(ema_keyword{}).ema);
  CHECK(nitro::to_eval_weights_ref(Average(Best(2))).to_string() == "Average(Best(2))");
  CHECK(nitro::is_weights_keyword_v<weights_keyword>);
  CHECK_FALSE(nitro::is_weights_keyword_v<ema_keyword>);

  std::string warned;
  auto r = nitro::weights_ref::deprecated_checkpoint("old.safetensors", [&](std::string_view s) { warned = s; });
  CHECK(r.deprecated_spelling());
  CHECK(r.path() == "old.safetensors");
  CHECK(warned.find("W-CKPT-001") != std::string::npos);
  CHECK(warned.find("weights = \"old.safetensors\"") != std::string::npos);
  // `checkpoint = latest >> best`: the same reference, not a path (it read `weights = "" names no file`)
  auto run = nitro::weights_ref::deprecated_checkpoint(nitro::latest >> nitro::best, [&](std::string_view s) { warned = s; });
  CHECK(run.which() == nitro::weights_ref::kind::checkpoint);
  CHECK(run.to_string() == "latest >> Best(1)");
  CHECK(warned ==
        "W-CKPT-001: `checkpoint = latest >> Best(1)` is the deprecated spelling of `weights = latest >> Best(1)`; it still works. Fix: "
        "write nitro::weights = latest >> Best(1).");
}

TEST_CASE("grammar: the values travel through the run keywords as the handle receives them") {
  using nitro::Average, nitro::Last;
  auto w = (nitro::weights = nitro::latest >> Average(Last(3)));
  CHECK(nitro::to_weights_ref(w.value).to_string() == "latest >> Average(Last(3))");
  auto p = (nitro::weights = "model.safetensors");  // arrives as char const*
  CHECK(nitro::to_weights_ref(p.value).path() == "model.safetensors");
  auto r = (nitro::resume = nitro::latest >> nitro::latest);
  CHECK(nitro::to_resume_ref(r.value).to_string() == "latest >> Last(1)");
  auto ev = (nitro::eval_weights = nitro::ema);
  CHECK(nitro::to_eval_weights_ref(ev.value).ema);
  auto ev2 = (nitro::eval_weights = nitro::best);
  CHECK(nitro::to_eval_weights_ref(ev2.value).to_string() == "Best(1)");
  auto w0 = (nitro::w0 = nitro::weights);
  CHECK(nitro::is_weights_keyword_v<decltype(w0.value)>);
  static_assert(nitro::check_w0_weights<decltype(w0.value), true>());
  auto rb = (nitro::restore_best = true);
  CHECK(nitro::to_restore_ref(rb.value)->to_string() == "Best(1)");
  auto ra = (nitro::restore_best = Average(Last(10)));
  CHECK(nitro::to_restore_ref(ra.value)->to_string() == "Average(Last(10))");
  auto ck = (nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_steps(500), .keep_last = 3});
  CHECK(ck.value.every.n == 500);
}

TEST_CASE("grammar: references resolve against a runs directory to the files they name") {
  using nitro::Average, nitro::Best, nitro::Last;
  auto runs = two_runs("resolve");
  nitro::resolve_context ctx{.runs_dir = runs};
  auto res = [&](nitro::weights_ref const& r) { return picked(nitro::resolve(r, ctx)); };
  using V = std::vector<std::string>;

  CHECK(res(nitro::latest >> nitro::latest) == V{"mlp-b-002@10"});
  CHECK(res(nitro::latest >> nitro::best) == V{"mlp-b-002@5"});
  CHECK(res(nitro::best) == V{"mlp-b-002@5"});  // bare: the latest run
  CHECK(res(nitro::run_id("mlp-a-001") >> nitro::best) == V{"mlp-a-001@20"});
  CHECK(res(nitro::run_id("a-0") >> Best(2)) == V{"mlp-a-001@30"});  // a unique part; the 2nd best
  CHECK(res(nitro::run_id("mlp-a-001") >> Last(2)) == V{"mlp-a-001@20"});  // the one before the latest
  CHECK(res(nitro::run_id("mlp-a-001") >> Average(Last(2))) == V{"mlp-a-001@20", "mlp-a-001@30"});
  CHECK(res(nitro::run_id("mlp-a-001") >> Average(Best(2))) == V{"mlp-a-001@20", "mlp-a-001@30"});
  CHECK(res(nitro::all >> nitro::best) == V{"mlp-a-001@20"});
  CHECK(res(nitro::all >> Best(2)) == V{"mlp-b-002@5"});
  CHECK(res(nitro::all >> nitro::latest) == V{"mlp-b-002@10"});
  CHECK(res(other_handle{runs / "mlp-a-001"} >> nitro::latest) == V{"mlp-a-001@30"});
  CHECK(res(nitro::run_id((runs / "mlp-a-001").string()) >> nitro::latest) == V{"mlp-a-001@30"});

  // the handle's own run is not "latest"; a bare checkpoint names it where the context says so
  nitro::resolve_context own{.runs_dir = runs, .own_run = runs / "mlp-b-002", .bare_is_own = false};
  CHECK(picked(nitro::resolve(nitro::latest >> nitro::latest, own)) == V{"mlp-a-001@30"});
  own.bare_is_own = true;
  CHECK(picked(nitro::resolve(Average(Last(2)), own)) == V{"mlp-b-002@5", "mlp-b-002@10"});

  // the files load: one, or the average
  auto one = nitro::resolve(nitro::run_id("mlp-a-001") >> nitro::best, ctx).load();
  CHECK(one.values<float>(one.at("params.w"))[0] == 20.0f);
  auto avg = nitro::resolve(nitro::run_id("mlp-a-001") >> Average(Last(3)), ctx).load();
  CHECK(avg.values<float>(avg.at("params.w"))[0] == 20.0f);  // (10 + 20 + 30) / 3

  // a path
  auto file = runs / "mlp-a-001" / "checkpoints" / "step-000000000010.safetensors";
  CHECK(nitro::resolve(nitro::weights_ref(file), ctx).checkpoints.at(0).file == file);
}

TEST_CASE("grammar: every failure to resolve is a coded error that says what is there") {
  using nitro::Average, nitro::Best, nitro::Last;
  auto runs = two_runs("resolve-errors");
  nitro::resolve_context ctx{.runs_dir = runs};
  std::string what;
  auto code = [&](nitro::weights_ref const& r, nitro::resolve_context const& c) { return code_of([&] { (void)nitro::resolve(r, c); }, &what); };

  CHECK(code(nitro::run_id("mlp-z") >> nitro::best, ctx) == "E-CKPT-021");
  CHECK(what.find("mlp-a-001") != std::string::npos);  // lists the runs there are
  CHECK(code(nitro::run_id("mlp-") >> nitro::best, ctx) == "E-CKPT-022");
  CHECK(what.find("mlp-b-002") != std::string::npos);
  CHECK(code(nitro::run_id("mlp-c-003") >> nitro::latest, ctx) == "E-CKPT-023");
  CHECK(code(nitro::run_id("mlp-a-001") >> Last(4), ctx) == "E-CKPT-024");
  CHECK(what.find("keeps 3") != std::string::npos);
  CHECK(code(nitro::run_id("mlp-b-002") >> Average(Best(3)), ctx) == "E-CKPT-024");
  CHECK(code(other_handle{runs / "nowhere"} >> nitro::best, ctx) == "E-CKPT-021");
  CHECK(code(nitro::weights_ref(runs / "nope.safetensors"), ctx) == "E-CKPT-001");
  CHECK(code(nitro::weights_ref(runs), ctx) == "E-CKPT-001");
  CHECK(code(nitro::latest >> nitro::best, {.runs_dir = runs / "absent"}) == "E-CKPT-020");

  auto empty = fresh_dir("resolve-empty");
  fs::create_directories(empty / "only-run");
  CHECK(code(nitro::latest >> nitro::best, {.runs_dir = empty}) == "E-CKPT-023");
  CHECK(code(nitro::all >> nitro::best, {.runs_dir = empty}) == "E-CKPT-023");
  CHECK(code(nitro::best, {.runs_dir = empty, .bare_is_own = true}) == "E-CKPT-023");

  // Best without a monitor; runs that rank differently; an index that lists a file no longer there
  nitro::checkpointer plain(empty / "plain" / "checkpoints", {.every = nitro::every_steps(1)});
  save(plain, 1, 0.1);
  CHECK(code(nitro::run_id("plain") >> nitro::best, {.runs_dir = empty}) == "E-CKPT-026");
  CHECK(code(nitro::run_id("plain") >> nitro::latest, {.runs_dir = empty}) == "none");
  nitro::checkpointer maxed(runs / "mlp-d-004" / "checkpoints", {.keep_best = 1, .monitor = "valid.acc", .mode = nitro::monitor_mode::max});
  nitro::safetensors_writer w;
  maxed.save(w, {.step = 1, .metrics = {{"valid.acc", 0.9}}});
  CHECK(code(nitro::all >> nitro::best, ctx) == "E-CKPT-027");
  CHECK(code(nitro::all >> nitro::latest, ctx) == "none");
  fs::remove(runs / "mlp-a-001" / "checkpoints" / "step-000000000020.safetensors");
  CHECK(code(nitro::run_id("mlp-a-001") >> nitro::best, ctx) == "E-CKPT-029");
}

TEST_CASE("run_lock: one writer a run folder; another process's run is refused with E-REC-009 naming it; a dead writer's lock is taken over") {
  const fs::path run = ckpt_test::fresh_dir("lock") / "run";
  fs::create_directories(run);
  CHECK(!nitro::run_lock::holder(run));  // never locked: no lock file at all
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {  // another process writes the run until it is killed
    nitro::run_lock lock(run);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  const std::string pid = "pid " + std::to_string(writer) + " on host ";
  auto who = nitro::run_lock::holder(run);
  REQUIRE(who);
  CHECK(who->starts_with(pid));
  const std::string refused = "E-REC-009: cannot resume from the run " + run.string() + ": it is being written by " + pid;
  CHECK_THROWS_WITH_AS(nitro::require_not_being_written(run, "resume from"), doctest::Contains(refused.c_str()), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::run_lock{run}, doctest::Contains("E-REC-009: cannot write the run"), nitro::error);
  ::kill(writer, SIGKILL);  // dies holding it: the kernel drops the lock, the file stays
  int status = 0;
  ::waitpid(writer, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(fs::exists(run / "lock"));
  CHECK(!nitro::run_lock::holder(run));
  CHECK_NOTHROW(nitro::require_not_being_written(run, "resume from"));
  {
    nitro::run_lock mine(run);  // taken over without a word
    CHECK(mine.held());
    CHECK(slurp(run / "lock").starts_with("pid " + std::to_string(::getpid()) + " on host "));
    nitro::run_lock again(run);  // this process's own run: shared (the command line and its handle)
    CHECK(again.held());
    CHECK(!nitro::run_lock::holder(run));
    nitro::run_lock moved = std::move(again);
    CHECK(!again.held());
    CHECK(moved.held());
  }
  CHECK(slurp(run / "lock").empty());  // released: an empty file
  CHECK(!nitro::run_lock::holder(run));
  ::close(ready[0]);
  ::close(ready[1]);
}
