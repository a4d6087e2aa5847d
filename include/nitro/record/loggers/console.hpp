// nitro/record/loggers/console.hpp — the run on the terminal.
//
//   nitro::console_logger()                              // stdout; a progress bar when it is a terminal
//   nitro::console_logger({.stream = stderr, .mode = nitro::console_options::plain})
//
// On a terminal (isatty) one line is redrawn in place at most `refresh_seconds` apart:
//   epoch 2/5 [#######--------------] 143/429  step 572/2145  loss 0.4123  41230 samples/s  ETA 0:00:38
// Elsewhere (a pipe, a file, CI) nothing is redrawn: a plain line is printed every
// log_every_n_steps steps (on_step):
//   step 100/2145  epoch 1/5  loss 0.6123  eta 0.001  41230 samples/s  ETA 0:00:47
// Evaluations and the end are plain lines in both modes. Nothing here allocates after on_setup.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/logger.hpp"

#include <chrono>       // redraw throttle
#include <cstdint>      // int64_t
#include <cstdio>       // FILE, snprintf
#include <string>       // describe()
#include <string_view>  // names

#include <unistd.h>     // isatty

namespace nitro {

struct console_options {
  enum display { automatic, bar, plain };

  std::FILE* stream = nullptr;   // nullptr: stdout
  display mode = automatic;      // automatic: a bar on a terminal, plain lines elsewhere
  double refresh_seconds = 0.1;  // the bar is redrawn at most this often
  int bar_width = 24;
  bool print_binding_report = false;
};

class console_logger : public run_logger {
 public:
  console_logger() = default;
  explicit console_logger(console_options opt) : m_opt(opt) {}

  std::string describe() const override { return "console"; }
  console_options const& options() const noexcept { return m_opt; }

  // Does this logger draw a bar (after on_setup)?
  bool draws_bar() const noexcept { return m_bar; }

  void on_setup(run_info const& info) override;

  void on_batch(step_progress const& p) override;

  void on_step(std::int64_t step, int epoch, scalars values) override;

  void on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) override;

  void on_end(run_status status, std::string_view reason) override;

 private:
  void clear_bar();
  static int append_scalars(char* line, int n, int cap, scalars values);
  static void format_duration(char* out, std::size_t cap, double seconds);

  console_options m_opt{};
  std::FILE* m_out = stdout;
  bool m_bar = false;
  bool m_drawn = false;
  std::int64_t m_info_total = 0;
  int m_max_epochs = 0;
  step_progress m_last{};
  std::chrono::steady_clock::time_point m_last_draw{};
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void console_logger::on_setup(run_info const& info) {
  m_out = m_opt.stream ? m_opt.stream : stdout;
  m_bar = m_opt.mode == console_options::bar || (m_opt.mode == console_options::automatic && ::isatty(fileno(m_out)));
  m_info_total = info.total_steps;
  m_max_epochs = info.max_epochs;
  m_drawn = false;
  m_last_draw = {};
  std::fprintf(m_out, "nitro: %s  %lld steps (%d %s of %lld)  batch %lld\n", info.experiment.c_str(),
               static_cast<long long>(info.total_steps), info.max_epochs, info.max_epochs == 1 ? "epoch" : "epochs",
               static_cast<long long>(info.steps_per_epoch), static_cast<long long>(info.batch_size));
  if (m_opt.print_binding_report && !info.binding_report.empty()) std::fputs(info.binding_report.c_str(), m_out);
  std::fflush(m_out);
}

NITRO_RUNTIME_INLINE void console_logger::on_batch(step_progress const& p) {
  m_last = p;
  if (!m_bar) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = p.step >= p.total_steps || p.batch >= p.steps_per_epoch;
  if (m_drawn && !last && std::chrono::duration<double>(now - m_last_draw).count() < m_opt.refresh_seconds) return;
  m_last_draw = now;
  char line[400];
  int n = std::snprintf(line, sizeof line, "\r\033[2Kepoch %d/%d [", p.epoch, p.max_epochs);
  const int width = m_opt.bar_width > 0 && m_opt.bar_width < 200 ? m_opt.bar_width : 24;
  const int fill = p.steps_per_epoch > 0 ? static_cast<int>(double(width) * double(p.batch) / double(p.steps_per_epoch)) : 0;
  for (int i = 0; i < width && n < int(sizeof line) - 2; ++i) line[n++] = i < fill ? '#' : '-';
  char eta[32];
  format_duration(eta, sizeof eta, p.eta_seconds);
  std::snprintf(line + n, sizeof line - std::size_t(n), "] %lld/%lld  step %lld/%lld  loss %.4f  %.0f samples/s  ETA %s",
                static_cast<long long>(p.batch), static_cast<long long>(p.steps_per_epoch), static_cast<long long>(p.step),
                static_cast<long long>(p.total_steps), p.loss, p.samples_per_second, eta);
  std::fputs(line, m_out);
  std::fflush(m_out);
  m_drawn = true;
}

NITRO_RUNTIME_INLINE void console_logger::on_step(std::int64_t step, int epoch, scalars values) {
  if (m_bar) return;  // the bar already shows it
  char line[600];
  int n = std::snprintf(line, sizeof line, "step %lld/%lld  epoch %d/%d", static_cast<long long>(step), static_cast<long long>(m_info_total),
                        epoch, m_max_epochs);
  n = append_scalars(line, n, int(sizeof line), values);
  char eta[32];
  format_duration(eta, sizeof eta, m_last.step == step ? m_last.eta_seconds : 0.0);
  if (n < int(sizeof line))
    std::snprintf(line + n, sizeof line - std::size_t(n), "  %.0f samples/s  ETA %s\n", m_last.samples_per_second, eta);
  std::fputs(line, m_out);
  std::fflush(m_out);
}

NITRO_RUNTIME_INLINE void console_logger::on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  clear_bar();
  char line[600];
  int n = std::snprintf(line, sizeof line, "step %lld  epoch %d/%d  %.*s", static_cast<long long>(step), epoch, m_max_epochs,
                        static_cast<int>(split.size()), split.data());
  for (auto const& [name, v] : m.scalars) {
    if (n >= int(sizeof line) - 1) break;
    n += std::snprintf(line + n, sizeof line - std::size_t(n), "  %s %.4f", name.c_str(), v);
  }
  if (n > int(sizeof line) - 2) n = int(sizeof line) - 2;
  line[n++] = '\n';
  line[n] = '\0';
  std::fputs(line, m_out);
  std::fflush(m_out);
}

NITRO_RUNTIME_INLINE void console_logger::on_end(run_status status, std::string_view reason) {
  clear_bar();
  char t[32];
  format_duration(t, sizeof t, m_last.elapsed_seconds);
  std::fprintf(m_out, "%s after %lld steps (%s)%s%.*s\n", to_string(status), static_cast<long long>(m_last.step), t,
               reason.empty() ? "" : ": ", static_cast<int>(reason.size()), reason.data());
  std::fflush(m_out);
}

NITRO_RUNTIME_INLINE void console_logger::clear_bar() {
  if (m_bar && m_drawn) {
    std::fputs("\r\033[2K", m_out);
    m_drawn = false;
  }
}

NITRO_RUNTIME_INLINE int console_logger::append_scalars(char* line, int n, int cap, scalars values) {
  for (auto const& s : values) {
    if (n >= cap - 1) break;
    n += std::snprintf(line + n, std::size_t(cap - n), "  %.*s %.4g", static_cast<int>(s.name.size()), s.name.data(), s.value);
  }
  return n < cap ? n : cap - 1;
}

NITRO_RUNTIME_INLINE void console_logger::format_duration(char* out, std::size_t cap, double seconds) {
  if (!(seconds >= 0) || seconds > 360000000.0) seconds = 0;
  const long long s = static_cast<long long>(seconds + 0.5);
  std::snprintf(out, cap, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
