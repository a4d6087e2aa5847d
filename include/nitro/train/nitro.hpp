// nitro/train/nitro.hpp — the handle: an experiment bound to its model, data and optimizer.
//
//   FashionMLP<256> e;
//   nitro::Nitro h(e, nitro::max_epochs = 5, nitro::ema = 0.999, nitro::early_stop = 3);   // a fixed point
//   h.train();                                 // loggers, EMA, early stop, divergence, checkpoints
//   auto test = h.evaluate("test");            // test.at("acc")
//   nitro::show(h);                            // the handle and its bindings
//   std::puts(nitro::history(h).to_text().c_str());
//
// The handle copies the experiment and binds its Device fields to its block of device scalars,
// resolves every run keyword (train/keywords.hpp: keyword, accessor, field, default — each with its
// source), builds the model (build_model), allocates the parameters in one flat buffer laid out by
// parameter group (param_group), initialises them from the seed, resolves the data (the `data`
// keyword, else build_data(), else a field `data`), builds the optimizer program (optim/program.hpp:
// rules, decay, anchors, clipping, SAM, schedules made for the horizon), then reads the weights or
// the checkpoint it starts from (weights, resume, w0: record/checkpoint.hpp, record/weights_ref.hpp).
//
// train() is the run: steps (forward -> loss -> backward, accumulated over `accum` micro-batches ->
// update), consulting the run control (train/run_control.hpp) after each one — divergence, the EMA
// of the weights, progress and the logged rows for every logger (console, JSONL, CSV, TensorBoard
// when the run has a directory; the `logger` keyword), the checkpointer — and after each epoch (or
// every eval_every steps) the valid split, which feeds early stopping, the monitor and the
// checkpoints' ranking. It ends finished, stopped (early stop, or asked to), diverged (the last good
// checkpoint kept) or failed (the error rethrown), then restore_best decides the weights it ends with.
// Every intermediate lives in the step's arena; after the first step a training step allocates
// nothing — logged steps included. A step that writes a checkpoint, and an evaluation, do allocate.
//
// A step is an optimizer step. With accum = k the loader still yields batches of batch_size (the
// micro-batches); k of them make one step whose gradient is their mean, the same as one batch k
// times larger. An epoch of n batches makes n / k steps; its last n % k batches are not used.
// The horizon (what the schedules are made for) is max_epochs epochs, or max_steps steps when given.
//
// Data parallel: a handle given the construction fact `nitro::kw::replicas = &job` (a dist::replicas
// of more than one rank: nitro::main passes the MPI job's) is one replica of the run. batch_size stays
// the GLOBAL batch; each rank trains on its shard, the gradients are summed over the ranks before the
// update, the step's loss and stop are agreed, evaluation is reduced over the ranks, and only rank 0
// writes the record. Without it nothing of this exists at run time (one null pointer).
//
// The handle is a façade over its parts, each its own header over the state it holds
// (train/handle_state.hpp): the step (train/step.hpp), evaluation (train/evaluation.hpp),
// checkpointing (train/checkpointing.hpp) and the loop (train/loop.hpp).
#pragma once

#include "nitro/train/checkpointing.hpp"
#include "nitro/train/evaluation.hpp"
#include "nitro/train/handle_state.hpp"
#include "nitro/train/loop.hpp"
#include "nitro/train/show.hpp"
#include "nitro/train/step.hpp"

#include <exception>    // a failed run records its error
#include <string>       // error texts
#include <string_view>  // split and field names
#include <type_traits>  // traits
#include <utility>      // move
#include <vector>       // summaries

namespace nitro {

template <class E, class... Kw>
class Nitro : detail::handle_state<E, Kw...> {
  using state_type = detail::handle_state<E, Kw...>;
  state_type& s() noexcept { return *this; }
  state_type const& s() const noexcept { return *this; }

 public:
  // The keywords and hooks bind (nitro::main reads it to tell a shared mistake once).
  static constexpr bool binds = state_type::binds;
  using typename state_type::experiment_type;
  using typename state_type::keywords_type;
  using typename state_type::model_type;
  using typename state_type::param_spec;
  using typename state_type::state_spec;
  using typename state_type::ps_type;
  using typename state_type::st_type;
  using typename state_type::data_type;
  using typename state_type::batch_type;
  using typename state_type::binding_type;
  using typename state_type::outputs_type;
  using typename state_type::layout_type;
  using typename state_type::param_store_type;
  using typename state_type::state_store_type;
  using typename state_type::schedules_type;
  using typename state_type::optimizer_type;
  using typename state_type::backend_type;

  explicit Nitro(E e, Kw... kw) : state_type(std::move(e), kw...) {
    auto& st = s();
    st.m_kw.validate();  // E-KW-007, E-EMA-001, E-STOP-001
    if (dist::replicas* r = st.m_kw.replicas.value; r && r->size() > 1) st.m_dist = r;  // one replica of a job
    if (st.m_kw.n_devs.value != 1)
      throw error("E-CUDA-011",
                  "n_devs = " + std::to_string(st.m_kw.n_devs.value) + " (from the " + to_string(st.m_kw.n_devs.source) +
                      ") asks for several devices, but this run uses the " + std::string(st.m_backend.name()) + " backend, which trains on one",
                  "leave n_devs at 1");
    (void)enter_program<E, Nitro>();  // cache_stats: compiled in (static init), entered here
    st.bind_device_fields();
    rng g(fold(st.m_kw.seed.value, 1));
    ps_type ps = st.m_params.view();
    st_type sv = st.m_state.view();
    st.m_model.init(ps, sv, g);
    const optim::program_options o{st.m_kw.gradient_clip_norm.value, st.m_kw.accum.value,
                                   state_type::horizon_of(st.m_data, st.m_kw.batch_size.value, st.m_kw.accum.value, st.m_kw.max_epochs.value,
                                                          st.m_kw.max_steps.value)};
    auto sched = detail::resolve_schedule_map(st.m_e, kw...);
    using W0 = std::remove_cvref_t<decltype(st.m_kw.w0.value)>;
    static_assert(checks_evaluated<check_w0_weights<W0, has_keyword<"weights", Kw...>() || has_keyword<"checkpoint", Kw...>()>()>);  // E-CKPT-103
    if constexpr (std::is_same_v<W0, not_given> || is_weights_keyword_v<W0>) st.m_opt.emplace(st.m_e, st.m_params, sched, o);
    else if constexpr (is_tree_v<W0>) st.m_opt.emplace(st.m_e, st.m_params, sched, o, st.m_kw.w0.value);
    else (void)w0_must_be_a_tree_of_tensors<W0>::ok;
    if constexpr (optimizer_type::two_pass)
      if (st.m_dist)
        throw error("E-DIST-011",
                    "the optimizer takes two passes (SAM/ASAM), which data-parallel training does not reduce (the first pass's gradient "
                    "would be each rank's own)",
                    "train SAM in one process, or use a one-pass rule under mpirun");
    detail::handle_ckpt::setup_run_directory(st);
    detail::handle_ckpt::setup(st);
    if (st.m_dist) detail::handle_loop::join_replicas(st);
  }
  Nitro(Nitro const&) = delete;  // a handle owns buffers and threads; build another instead
  Nitro& operator=(Nitro const&) = delete;

  // ---- what it holds --------------------------------------------------------------------------
  E const& experiment() const noexcept { return s().m_e; }
  model_type const& model() const noexcept { return s().m_model; }
  data_type const& data() const noexcept { return s().m_data; }
  ps_type params() const { return s().m_params.view(); }
  st_type state() const { return s().m_state.view(); }
  param_store_type& param_buffer() noexcept { return s().m_params; }
  state_store_type& state_buffer() noexcept { return s().m_state; }
  backend_type const& backend() const noexcept { return s().m_backend; }
  std::int64_t step() const noexcept { return s().step(); }  // optimizer steps (restored with the optimizer's state)
  // The damaged checkpoints a resume of a run's latest passed over to reach a whole one, newest first
  // ("file: code what is wrong"); empty when the latest was whole.
  std::vector<std::string> const& resume_skipped() const noexcept { return s().m_resume_skipped; }
  int epoch() const noexcept { return s().m_epoch; }
  resolved<std::uint64_t> const& seed() const noexcept { return s().m_kw.seed; }
  resolved<int> const& max_epochs() const noexcept { return s().m_kw.max_epochs; }
  resolved<std::int64_t> const& batch_size() const noexcept { return s().m_kw.batch_size; }
  resolved<int> const& accum() const noexcept { return s().m_kw.accum; }
  resolved<double> const& gradient_clip_norm() const noexcept { return s().m_kw.gradient_clip_norm; }
  // Every run keyword and construction fact with its value and source (records() for the manifest and explain).
  keywords_type const& keywords() const noexcept { return s().m_kw; }
  double learning_rate() const noexcept { return s().m_opt->base_rate(); }  // the base: learning_rate(), else lr, else 1e-3
  // The optimizer program: groups, rules, schedules, its state for checkpoints, describe() for show.
  optimizer_type& optimizer() noexcept { return *s().m_opt; }
  optimizer_type const& optimizer() const noexcept { return *s().m_opt; }
  std::int64_t micro_steps() const noexcept { return s().micro_steps(); }  // batches trained on
  // The run: its status (running until train() ends it), its table, the EMA and the monitor.
  run_status status() const noexcept { return s().m_run.status(); }
  std::string const& status_reason() const noexcept { return s().m_run.reason(); }
  run_history const& history() const noexcept { return s().m_run.history(); }  // nitro::history(h)
  ema_weights const& ema() const noexcept { return s().m_run.ema(); }
  early_stopper const& monitor() const noexcept { return s().m_run.monitor(); }
  // The optimizer steps train() runs to: max_steps, else max_epochs epochs.
  std::int64_t horizon() const noexcept { return s().m_opt->horizon(); }
  // The run's directory (empty: the handle keeps no record, or a new one is not made yet: it is
  // made when the run first writes, train() or save_checkpoint()) — also what lets another handle
  // name this run: nitro::weights = h >> nitro::best.
  std::filesystem::path const& run_directory() const noexcept { return s().m_run_dir; }
  // null before the run first writes, and on ranks other than 0
  checkpointer const* checkpoints() const noexcept { return s().m_ckpt ? &*s().m_ckpt : nullptr; }
  // The job this handle is one replica of (null: one process); only rank 0 writes the record.
  dist::replicas* distributed() const noexcept { return s().m_dist; }
  bool writes_records() const noexcept { return s().writes_records(); }

  // The optimizer's part of show() (train/show.hpp): the clip threshold, the schedule keys with
  // their source and binding, one row per parameter group, the rules and where each scheduled
  // value lands. describe_handle(h, kw) fills the rest.
  void describe_optimizer(handle_description& d) const {
    optimizer_type const& o = *s().m_opt;
    d.gradient_clip_norm = o.gradient_clip_norm();
    const char* source = to_string(s().m_kw.schedules.source);
    for (auto const& i : o.schedule_infos()) d.schedules.push_back({i.key, source, i.binds_to, i.curve});
    for (auto const& g : o.group_infos()) d.groups.push_back({g.name, g.params, g.rate, g.ratio, g.anchor, g.lambda, g.rule});
    d.optimizer = o.rule_summary();
    for (auto const& l : o.landings()) d.landings.push_back({l.key, l.group, l.field});
  }
  // What show(h) prints and the loggers receive at setup as the binding report.
  handle_description description() const {
    handle_description d = describe_handle(*this, s().m_kw);
    describe_optimizer(d);
    return d;
  }
  arena const& step_memory() const noexcept { return s().m_arena; }
  // What crossed between the host's parameter and state buffers and their copy on the backend's
  // device (train/device_params.hpp): zero on the CPU.
  struct crossings {
    std::int64_t uploads = 0;    // a store sent to the device (values, state)
    std::int64_t downloads = 0;  // a gradient or a state leaf read back
  };
  crossings device_crossings() const noexcept { return {s().m_device.uploads(), s().m_device.downloads()}; }
  // How this handle's loaders read a split (train: shuffled, whole batches; others: in order).
  data::loader_options loader_options_for(std::string_view split) const { return s().loader_options_for(split); }

  // ---- device scalars -------------------------------------------------------------------------
  // Writes a Device field between steps: the next step's hooks and kernels read the new value.
  // No new program, no rebuild. Naming a GraphConst or Host field is a compile error.
  template <auto Member, class V>
  void set_device(V value) {
    using F = typename detail::member_type_of<decltype(Member)>::type;
    if constexpr (is_graph_const_v<F>) (void)graph_const_is_not_writable<Member>::ok;
    else if constexpr (!is_device_v<F>) (void)host_field_is_not_on_the_device<Member>::ok;
    else (s().m_e.*Member).set(static_cast<typename F::value_type>(value));
  }
  // The same by name, checked at run time (for the command line and sweeps).
  void set_device(std::string_view field, double value) {
    bool done = false;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if (done || D::name.view() != field) return;
      if constexpr (D::residency == residency::device) {
        D::get(s().m_e).set(static_cast<typename D::type::value_type>(value));
        done = true;
      } else {
        throw error("E-MARK-004", "'" + std::string(field) + "' is a " + to_string(D::residency) + " field, not a Device field",
                    D::residency == residency::graph_const ? "a GraphConst's value is the program: select the instantiation compiled for the value you want"
                                                           : "declare it nitro::Device<T> to change it between steps");
      }
    });
    if (!done)
      throw error("E-MARK-005", "the experiment has no field called '" + std::string(field) + "'", "name a Device field of the experiment");
  }


  // ---- training -------------------------------------------------------------------------------
  // Trains from where the handle is (a resume starts mid-epoch) to the horizon, evaluating the
  // valid split (when the data has one) after each epoch and every eval_every steps. `verbose =
  // false` leaves the console out of the default loggers. Returns one summary per completed epoch.
  std::vector<epoch_summary> train(bool verbose = true) {
    train_options o;
    o.console = verbose;
    return train(o);
  }
  std::vector<epoch_summary> train(train_options const& opt) {
    auto& run = s().m_run;
    if (run.ended()) return {};  // a handle trains once: build another to train again
    try {
      return detail::handle_loop::train(s(), opt, [this] { return show_text(description()); });
    } catch (std::exception const& x) {
      end_failed(run, x);
    }
  }

 private:
  // The run ends as failed with the error's text, and the error goes on. When the record cannot
  // say so either (the full disk that failed a checkpoint fails the status file too), the first
  // error stays the one thrown, with its code and fix, and says that the record is behind.
  [[noreturn]] static void end_failed(run_control& run, std::exception const& x) {
    if (run.begun() && !run.ended()) {
      try {
        run.end(run_status::failed, x.what());
      } catch (std::exception const& y) {
        auto const* e = dynamic_cast<nitro::error const*>(&x);
        auto const* ye = dynamic_cast<nitro::error const*>(&y);
        throw nitro::error(e ? e->code() : "E-REC-001",
                           (e ? e->sentence() : std::string(x.what())) + "; the run's record could not say so either (" +
                               (ye ? ye->code() + ": " + ye->sentence() : std::string(y.what())) + ")",
                           e ? e->fix() : std::string("free space in the run directory (or check the disk), then resume the run"));
      }
    }
    throw;
  }

 public:
  // One micro-batch: forward, loss and backward, the gradient accumulating into the flat buffer;
  // every accum-th call ends with the optimizer step. With SAM, two passes (the gradient at w, then
  // at w + e). Returns the batch's loss (at w).
  double train_step(batch_type const& host_batch) { return detail::handle_step::train(s(), host_batch); }

  // ---- checkpoints ----------------------------------------------------------------------------
  // A checkpoint now, whatever the policy says (a user's own loop, a signal handler's aftermath).
  void save_checkpoint() { detail::handle_ckpt::save(s()); }

  // ---- evaluation -----------------------------------------------------------------------------
  // The split's metrics: what the metrics hook returns, reduced and finalized (finalize_metrics),
  // plus "loss" (mean over batches) when eval_loss says so. With eval_weights, evaluated with
  // those weights (the EMA, the best checkpoint, an average), the live weights left as they were.
  metric_values evaluate(std::string_view split_name) { return detail::handle_eval::evaluate(s(), split_name); }

  // Forward alone on a batch that may lack labels; the outputs own their memory.
  template <class Batch>
  outputs_type predict(Batch const& host_batch) {
    return detail::handle_step::predict(s(), host_batch);
  }
};

template <class E, class... Kw>
Nitro(E, Kw...) -> Nitro<E, Kw...>;

}  // namespace nitro
