// nitro/record/loggers/tensorboard.hpp — TensorBoard event files, written without protobuf.
//
//   nitro::tensorboard_logger()            // events.out.tfevents.* in the run directory
//   nitro::tensorboard_logger("tb")        // or in a folder of it (absolute paths too)
//   $ tensorboard --logdir runs            // every run directory is a TensorBoard run
//
// An event file is a sequence of TFRecords: the payload's length (uint64, little-endian), the
// masked CRC32C of those 8 bytes (uint32), the payload, the masked CRC32C of the payload; a
// masked CRC is ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each payload is a tensorflow.Event
// protocol buffer, hand-encoded here (the five fields nitro writes):
//   Event    1: wall_time (double)  2: step (int64)  3: file_version (string)  5: summary (Summary)
//   Summary  1: value (repeated Value)
//   Value    1: tag (string)  2: simple_value (float)  9: metadata (SummaryMetadata)  8: tensor (TensorProto)
//   SummaryMetadata 1: plugin_data { 1: plugin_name }     TensorProto 1: dtype (7 = string) 2: shape 8: string_val
// The first event carries file_version "brain.Event:2"; the binding report is a text summary
// ("binding_report", TensorBoard's Text tab) at setup and the final status another ("status").
// Scalars are tagged "<split>/<name>" (train/loss, valid/acc, train/eta), one event per logged
// step or evaluation.
//
// Guarantee: each record is written with one write and flushed, so a crash leaves every earlier
// record intact and at worst a truncated last one — which TensorBoard's reader (and the CRC)
// recognise and stop at. After on_setup an event allocates nothing (its buffers are reused).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/loggers/detail/crc32c.hpp"
#include "nitro/record/detail/record_text.hpp"
#include "nitro/record/logger.hpp"

#include <atomic>       // file sequence numbers
#include <chrono>       // wall time
#include <cstdint>      // fixed widths
#include <cstdio>       // snprintf
#include <cstring>      // memcpy
#include <filesystem>   // paths
#include <string>       // buffers
#include <string_view>  // tags

#include <unistd.h>     // gethostname, getpid

namespace nitro {

namespace detail::tb {

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void put_key(std::string& out, unsigned field, unsigned wire) { put_varint(out, (std::uint64_t(field) << 3) | wire); }
inline void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void put_double(std::string& out, unsigned field, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_key(out, field, 1);
  put_le(out, bits, 8);
}
inline void put_float(std::string& out, unsigned field, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_key(out, field, 5);
  put_le(out, bits, 4);
}
inline void put_int(std::string& out, unsigned field, std::int64_t v) {
  put_key(out, field, 0);
  put_varint(out, static_cast<std::uint64_t>(v));  // int64: two's complement, 10 bytes when negative
}
inline void put_bytes(std::string& out, unsigned field, std::string_view s) {
  put_key(out, field, 2);
  put_varint(out, s.size());
  out.append(s.data(), s.size());
}

}  // namespace detail::tb

class tensorboard_logger : public run_logger {
 public:
  explicit tensorboard_logger(std::filesystem::path dir = {}) : m_dir(std::move(dir)) {}
  tensorboard_logger(tensorboard_logger const& o) : run_logger(o), m_dir(o.m_dir) {}  // a description: the file opens in on_setup
  tensorboard_logger& operator=(tensorboard_logger const&) = delete;

  std::string describe() const override { return m_dir.empty() ? "tensorboard" : "tensorboard(" + m_dir.string() + ")"; }
  // The event file (after on_setup).
  std::filesystem::path const& path() const noexcept { return m_file.path(); }

  void on_setup(run_info const& info) override;

  void on_step(std::int64_t step, int /*epoch*/, scalars values) override;
  void on_eval(std::int64_t step, int /*epoch*/, std::string_view split, metric_values const& m) override;
  void on_end(run_status status, std::string_view reason) override;

 private:
  static double wall_time() noexcept {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  void begin_summary() { m_summary.clear(); }
  void add_scalar(std::string_view split, std::string_view name, double v);
  void write_summary(std::int64_t step);
  void write_text(std::int64_t step, std::string_view tag, std::string_view text);
  void write_event();

  std::filesystem::path m_dir;
  detail::append_file m_file;
  std::string m_event, m_record, m_summary, m_value;
  std::int64_t m_last_step = 0;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void tensorboard_logger::on_setup(run_info const& info) {
  const std::filesystem::path dir = m_dir.is_absolute() || info.dir.empty() ? (m_dir.empty() ? std::filesystem::path(".") : m_dir) : info.dir / m_dir;
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  static std::atomic<int> sequence{0};
  const double now = wall_time();
  char name[400];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%d.%d", static_cast<long long>(now), host, static_cast<int>(::getpid()),
                sequence.fetch_add(1));
  m_file.open(dir / name, "TensorBoard event file");
  m_event.reserve(4096);
  m_record.reserve(4096);
  m_summary.reserve(4096);
  m_value.reserve(256);
  // the first event: the file version
  m_event.clear();
  detail::tb::put_double(m_event, 1, now);
  detail::tb::put_int(m_event, 2, info.start_step);
  detail::tb::put_bytes(m_event, 3, "brain.Event:2");
  write_event();
  if (!info.binding_report.empty()) write_text(info.start_step, "binding_report", info.binding_report);
}

NITRO_RUNTIME_INLINE void tensorboard_logger::on_step(std::int64_t step, int /*epoch*/, scalars values) {
  m_last_step = step;
  begin_summary();
  for (auto const& s : values) add_scalar("train", s.name, s.value);
  write_summary(step);
}

NITRO_RUNTIME_INLINE void tensorboard_logger::on_eval(std::int64_t step, int /*epoch*/, std::string_view split, metric_values const& m) {
  m_last_step = step;
  begin_summary();
  for (auto const& [name, v] : m.scalars) add_scalar(split, name, v);
  write_summary(step);
}

NITRO_RUNTIME_INLINE void tensorboard_logger::on_end(run_status status, std::string_view reason) {
  std::string text = to_string(status);
  if (!reason.empty()) text += ": " + std::string(reason);
  write_text(m_last_step, "status", text);
  m_file.close();
}

NITRO_RUNTIME_INLINE void tensorboard_logger::add_scalar(std::string_view split, std::string_view name, double v) {
  m_value.clear();
  // tag = split + "/" + name, written as one length-delimited field
  detail::tb::put_key(m_value, 1, 2);
  detail::tb::put_varint(m_value, split.size() + 1 + name.size());
  m_value.append(split.data(), split.size());
  m_value += '/';
  m_value.append(name.data(), name.size());
  detail::tb::put_float(m_value, 2, static_cast<float>(v));
  detail::tb::put_bytes(m_summary, 1, m_value);
}

NITRO_RUNTIME_INLINE void tensorboard_logger::write_summary(std::int64_t step) {
  if (m_summary.empty()) return;
  m_event.clear();
  detail::tb::put_double(m_event, 1, wall_time());
  detail::tb::put_int(m_event, 2, step);
  detail::tb::put_bytes(m_event, 5, m_summary);
  write_event();
}

NITRO_RUNTIME_INLINE void tensorboard_logger::write_text(std::int64_t step, std::string_view tag, std::string_view text) {
  std::string plugin, meta, tensor, value, summary;
  detail::tb::put_bytes(plugin, 1, "text");
  detail::tb::put_bytes(meta, 1, plugin);
  detail::tb::put_int(tensor, 1, 7);  // DT_STRING
  detail::tb::put_bytes(tensor, 2, "");  // a scalar: no dimensions
  detail::tb::put_bytes(tensor, 8, text);
  detail::tb::put_bytes(value, 1, tag);
  detail::tb::put_bytes(value, 9, meta);
  detail::tb::put_bytes(value, 8, tensor);
  detail::tb::put_bytes(summary, 1, value);
  m_event.clear();
  detail::tb::put_double(m_event, 1, wall_time());
  detail::tb::put_int(m_event, 2, step);
  detail::tb::put_bytes(m_event, 5, summary);
  write_event();
}

NITRO_RUNTIME_INLINE void tensorboard_logger::write_event() {
  m_record.clear();
  detail::tb::put_le(m_record, m_event.size(), 8);
  detail::tb::put_le(m_record, detail::masked_crc32c(m_record.data(), 8), 4);
  m_record += m_event;
  detail::tb::put_le(m_record, detail::masked_crc32c(m_event.data(), m_event.size()), 4);
  m_file.write(m_record);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
