// nitro/core/error.hpp — the one run-time error type.
//
// Every run-time failure a user can cause is a `nitro::error` carrying a stable code
// (E-KNOB-005, E-DATA-001, ...), one sentence saying what is wrong, and the fix.
// Codes are listed once, with an example, in docs/errors.md.
#pragma once

#include <stdexcept>  // runtime_error
#include <string>     // code, sentence, fix

namespace nitro {

class error : public std::runtime_error {
 public:
  error(std::string code, std::string sentence, std::string fix = {})
      : std::runtime_error(format(code, sentence, fix)),
        m_code(std::move(code)), m_sentence(std::move(sentence)), m_fix(std::move(fix)) {}

  std::string const& code() const noexcept { return m_code; }
  std::string const& sentence() const noexcept { return m_sentence; }
  std::string const& fix() const noexcept { return m_fix; }

 private:
  static std::string format(std::string const& code, std::string const& sentence, std::string const& fix) {
    std::string s = code + ": " + sentence;
    if (!fix.empty()) s += "\n  fix: " + fix;
    return s;
  }
  std::string m_code, m_sentence, m_fix;
};

}  // namespace nitro
