// nitro/cli/status_logger.hpp — status.json of a run of the command line, kept by a logger.
//
//   auto st = std::make_shared<nitro::cli::status_logger>(rec, record);   // the run's folder, the fixed fields
//   nitro::Nitro h(e, nitro::logger = nitro::loggers(nitro::default_loggers, st), ...);
//   h.train();                                                             // status.json follows the run
//   st->record().state, st->record().last                                   // what it ended with
//
// The trainer tells every logger what happens (record/logger.hpp); this one keeps the run's
// status_record (knobs/records.hpp): the state, the step, the last value of every metric as
// "split/name", the best value of the monitored metric, and a heartbeat. status.json is rewritten
// atomically at setup, at each evaluation, at the end, and on a logged step when the last write
// is `heartbeat_seconds` old — those writes allocate (the steps between them do not).
#pragma once

#include "nitro/knobs/records.hpp"
#include "nitro/record/logger.hpp"

#include <chrono>       // the heartbeat
#include <cstdint>      // int64_t
#include <string>       // names
#include <string_view>  // splits
#include <utility>      // move

namespace nitro::cli {

class status_logger : public run_logger {
 public:
  status_logger(run_record rec, status_record st, double heartbeat_seconds = 5.0)
      : m_rec(std::move(rec)), m_st(std::move(st)), m_heartbeat(heartbeat_seconds) {}

  std::string describe() const override { return "status(" + m_rec.path("status.json") + ")"; }
  status_record const& record() const noexcept { return m_st; }
  bool ended() const noexcept { return m_ended; }

  // Ends the record without the trainer (the run failed before it began).
  void fail(std::string const& reason) {
    m_st.state = "failed";
    m_st.error = reason;
    m_st.finished = iso_time_now();
    m_ended = true;
    write();
  }

  void on_setup(run_info const& info) override {
    m_st.horizon_steps = info.total_steps;
    m_st.horizon_epochs = info.max_epochs;
    m_st.step = info.start_step;
    write();
  }
  void on_batch(step_progress const& p) override {
    m_st.step = p.step;
    m_st.epoch = p.epoch;
  }
  void on_step(std::int64_t step, int epoch, scalars values) override {
    m_st.step = step;
    m_st.epoch = epoch;
    for (auto const& s : values) set_last("train", s.name, s.value);
    if (std::chrono::steady_clock::now() - m_written > m_heartbeat) write();
  }
  void on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) override {
    m_st.step = step;
    m_st.epoch = epoch;
    for (auto const& [name, v] : m.scalars) {
      set_last(split, name, v);
      if (m_st.best_metric == std::string(split) + "/" + name &&
          (!m_st.best_value || (m_st.best_minimize ? v < *m_st.best_value : v > *m_st.best_value))) {
        m_st.best_value = v;
        m_st.best_step = step;
      }
    }
    write();
  }
  void on_end(run_status status, std::string_view reason) override {
    m_st.state = to_string(status);
    if (status == run_status::failed) m_st.error = std::string(reason);
    else m_st.reason = std::string(reason);
    m_st.finished = iso_time_now();
    m_ended = true;
    write();
  }

 private:
  void set_last(std::string_view split, std::string_view name, double v) {
    m_key.assign(split);
    m_key += '/';
    m_key += name;
    auto it = m_st.last.find(m_key);
    if (it != m_st.last.end()) it->second = v;
    else m_st.last.emplace(m_key, v);
  }
  void write() {
    m_rec.write_status(m_st.json());
    m_written = std::chrono::steady_clock::now();
  }

  run_record m_rec;
  status_record m_st;
  std::chrono::duration<double> m_heartbeat;
  std::chrono::steady_clock::time_point m_written{};
  std::string m_key;
  bool m_ended = false;
};

}  // namespace nitro::cli
