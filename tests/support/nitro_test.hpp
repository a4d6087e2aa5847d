// tests/support/nitro_test.hpp — the helpers every test family shares: scratch folders, whole files,
// and the text of the nitro::error a call throws. One copy, so a fix reaches every test.
//
//   auto dir = nitro_test::tmp_dir("trainer/resume");   // empty, under $NITRO_TEST_TMP
//   nitro_test::spit(dir / "x.txt", "bytes");  CHECK(nitro_test::slurp(dir / "x.txt") == "bytes");
//   CHECK(nitro_test::error_of([&] { h.train(); }).rfind("E-TRAIN-001", 0) == 0);
#pragma once

#include <nitro/core/error.hpp>

#include <cstdlib>     // getenv
#include <filesystem>  // folders
#include <fstream>     // whole files
#include <iterator>    // istreambuf_iterator
#include <string>      // texts

namespace nitro_test {

// A fresh, empty folder `name` (may hold '/') under $NITRO_TEST_TMP — CTest points it into the build
// folder — or the system's temporary folder.
inline std::filesystem::path tmp_dir(std::string const& name) {
  char const* base = std::getenv("NITRO_TEST_TMP");
  const std::filesystem::path p = std::filesystem::path(base ? base : std::filesystem::temp_directory_path().string()) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// A file's whole contents ("" when it cannot be read).
inline std::string slurp(std::filesystem::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Replaces a file's contents with `s` (a plain write: tests make damaged files on purpose).
inline void spit(std::filesystem::path const& p, std::string const& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// What the nitro::error thrown by f() says in full (code, sentence, fix), or "no error".
inline std::string error_of(auto&& f) {
  try {
    f();
  } catch (nitro::error const& e) {
    return e.what();
  }
  return "no error";
}

// "CODE: sentence" of the nitro::error thrown by f() (without the fix), or "no error".
inline std::string code_and_sentence_of(auto&& f) {
  try {
    f();
  } catch (nitro::error const& e) {
    return e.code() + ": " + e.sentence();
  }
  return "no error";
}

}  // namespace nitro_test
