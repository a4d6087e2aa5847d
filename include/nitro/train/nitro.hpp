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
// Data parallel: a handle built while a nitro::dist::data_parallel scope lives (dist/data_parallel.hpp,
// made by a program launched with mpirun) is one replica of the run. batch_size stays the GLOBAL batch;
// each rank trains on its shard, the gradients are summed over the ranks before the update, the step's
// loss and stop are agreed, evaluation is reduced over the ranks, and only rank 0 writes the record.
// Without a scope nothing of this exists at run time (one null pointer).
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/dist/data_parallel.hpp"
#include "nitro/dist/gradients.hpp"
#include "nitro/dist/metrics.hpp"
#include "nitro/dist/shard.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/data/dataset.hpp"
#include "nitro/data/loader.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/optim/program.hpp"
#include "nitro/optim/schedule_map.hpp"
#include "nitro/tensor/arena.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/core/cache_stats.hpp"
#include "nitro/record/history.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/nn/metrics.hpp"
#include "nitro/train/run_control.hpp"
#include "nitro/record/run_reference.hpp"
#include "nitro/train/show.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>    // any_of, copy
#include <chrono>       // throughput
#include <cmath>        // isfinite, sqrt
#include <csignal>      // sig_atomic_t: a stop asked from outside
#include <cstdint>      // int64_t
#include <cstdio>       // console lines
#include <cstring>      // memset: SAM's first-pass gradient
#include <filesystem>   // the run directory
#include <memory>       // device-scalar block
#include <optional>     // loader batches, the optimizer program, the checkpointer
#include <string>       // names
#include <string_view>  // split names
#include <tuple>        // get on forward's pair
#include <type_traits>  // traits
#include <utility>      // move
#include <vector>       // summaries, slots

namespace nitro {

// The construction fact `data`: a keyword without an accessor. Spelled nitro::kw::data, since
// nitro::data is the namespace of data sets.
namespace kw { inline constexpr keyword<"data"> data{}; }

template <class Experiment>
struct experiment_has_no_data {
  static_assert(always_false<Experiment>,
                "E-DATA-007: the handle found no data: pass nitro::data = ..., define `auto build_data() const`, or give "
                "the experiment a field `data` holding a data set (nitro::data::fashion_mnist(), ...).");
  static constexpr bool ok = false;
};
template <class Hook, class Returned>
struct loss_must_return_tensor {
  static_assert(always_false<Hook, Returned>,
                "E-BIND-008: loss must return a nitro::Tensor of one element that carries the gradient (the result "
                "of nitro::nn::logitcrossentropy, nitro::mean, ...). Fix: return the tensor, not .item().");
  static constexpr bool ok = false;
};

template <class Given>
struct schedules_must_be_a_schedule_map {
  static_assert(always_false<Given>,
                "E-SCHED-009: the schedules keyword or schedules() accessor must give a nitro::schedule_map{...} "
                "(the type given is shown above). Fix: return nitro::schedule_map{nitro::key<\"eta\"> = ...}.");
  static constexpr bool ok = false;
};
template <class Given>
struct w0_must_be_a_tree_of_tensors {
  static_assert(always_false<Given>,
                "E-OPT-019: the w0 keyword takes a tree of tensors shaped like ps (h.params() of another handle, say), "
                "the anchor for groups whose decay_anchor is nitro::anchor::w0. Fix: pass such a tree.");
  static constexpr bool ok = false;
};

template <class Given>
struct checkpointer_must_be_a_policy {
  static_assert(always_false<Given>,
                "E-CKPT-104: the checkpointer keyword, accessor or field must give a nitro::checkpoint_policy{...} "
                "(the type given is shown above). Fix: nitro::kw::checkpointer = nitro::checkpoint_policy{.every = "
                "nitro::every_epochs(1), .keep_last = 3}.");
  static constexpr bool ok = false;
};

namespace detail {

// The schedule map: the `schedules` keyword, else the schedules() accessor, else none.
template <class E, class... Kw>
auto resolve_schedule_map(E const& e, Kw const&... kw) {
  auto r = resolve_schedules(e, kw...);
  using V = std::remove_cvref_t<decltype(r.value)>;
  if constexpr (is_schedule_map<V>::value) return r.value;
  else if constexpr (std::is_same_v<V, framework_default>) return schedule_map<>{};
  else {
    (void)schedules_must_be_a_schedule_map<V>::ok;
    return schedule_map<>{};
  }
}

template <class E, class... Kw>
auto resolve_data(E const& e, Kw const&... kw) {
  if constexpr (has_keyword<"data", Kw...>()) return get_keyword<"data">(kw...);
  else if constexpr (hook::build_data::present<E>) return e.build_data();
  else if constexpr (requires { e.data.splits; }) return e.data;
  else {
    (void)experiment_has_no_data<E>::ok;
    return data::dataset<int>{};
  }
}

// Samples in a batch: the last extent of its first tensor field.
template <class Batch>
std::int64_t batch_samples(Batch const& b) {
  std::int64_t n = -1;
  boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
    auto const& t = boost::hana::second(acc)(b);
    if (n < 0) n = t.rank() == 0 ? 1 : t.batch();
  });
  return n < 0 ? 0 : n;
}

template <class T> struct is_tensor : std::false_type {};
template <class S> struct is_tensor<basic_tensor<S>> : std::true_type {};

// Every array leaf of forward's outputs keeps the batch dimension last.
template <class O>
void check_outputs_batch_last(O const& out, std::int64_t samples, char const* leaf = "outputs") {
  if constexpr (is_tensor<O>::value) {
    const std::int64_t last = out.rank() == 0 ? 1 : out.size(-1);
    if (last != samples)
      throw error("E-BIND-006",
                  std::string("forward's output '") + leaf + "' has shape " + out.shape().to_string() + ": its last extent " +
                      std::to_string(last) + " is not the batch's " + std::to_string(samples) + " samples",
                  "keep the batch dimension last in every output, and leave reductions over the batch to loss and metrics");
  } else if constexpr (is_hana_struct_v<O>) {
    boost::hana::for_each(boost::hana::accessors<O>(), [&](auto acc) {
      check_outputs_batch_last(boost::hana::second(acc)(out), samples, boost::hana::to<char const*>(boost::hana::first(acc)));
    });
  }
}

template <class O>
O clone_outputs(O const& out) {
  if constexpr (is_tensor<O>::value) return out.clone();
  else if constexpr (is_hana_struct_v<O>) {
    O copy = out;
    boost::hana::for_each(boost::hana::accessors<O>(), [&](auto acc) {
      auto& leaf = boost::hana::second(acc)(copy);
      leaf = clone_outputs(leaf);
    });
    return copy;
  } else return out;
}

}  // namespace detail

struct epoch_summary {
  int epoch = 0;
  double train_loss = 0;
  double samples_per_second = 0;
  metric_values valid;
};

// How one call of train() runs (the run keywords say everything else).
struct train_options {
  bool console = true;                                // the console among the default loggers (train(false): without)
  std::vector<std::string> evaluate_after;            // splits evaluated, logged and kept when training ends ({"test"})
  std::sig_atomic_t volatile const* stop = nullptr;   // checked between steps: non-zero ends the run as `stopped`
};

template <class E, class... Kw>
class Nitro {
  static_assert(experiment<E>,
                "nitro::Nitro(e, ...): the experiment type is not adapted; add NITRO_EXPERIMENT(Name, fields...) after it");
  static_assert(experiment_traits<E>::complete);
  static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
    return (check_run_keyword<Kw, I + 2>() && ...);
  }(std::index_sequence_for<Kw...>{}));
  static_assert(hook::build_model::present<E>,
                "E-BIND-009: the experiment has no build_model() hook. Fix: add `auto build_model() const { return "
                "nitro::nn::chain(...); }`.");

 public:
  using experiment_type = E;
  using keywords_type = run_keywords<E, Kw...>;
  using model_type = std::remove_cvref_t<decltype(std::declval<E const&>().build_model())>;
  static_assert(nn::layer<model_type>, "E-BIND-010: build_model() must return a nitro layer (nitro::nn::chain(...), a dense, ...)");
  using param_spec = typename model_type::param_spec;
  using state_spec = typename model_type::state_spec;
  using ps_type = nn::params_t<param_spec, float>;
  using st_type = nn::params_t<state_spec, float>;
  using data_type = std::remove_cvref_t<decltype(detail::resolve_data(std::declval<E const&>(), std::declval<Kw const&>()...))>;
  using batch_type = typename data_type::batch_type;
  using binding_type = binding<E, batch_type, model_type, ps_type, st_type>;
  using outputs_type = typename binding_type::outputs;
  using layout_type = group_layout<E, param_spec>;
  using param_store_type = param_store<param_spec, float, layout_type>;
  using state_store_type = param_store<state_spec>;
  using schedules_type = decltype(detail::resolve_schedule_map(std::declval<E const&>(), std::declval<Kw const&>()...));
  using optimizer_type = optim::program<E, param_spec, schedules_type>;
  static_assert(binding_type::loss_fits && binding_type::metrics_fits);

  explicit Nitro(E e, Kw... kw)
      : m_e(std::move(e)),
        m_kw(m_e, kw...),
        m_model(m_e.build_model()),
        m_params(true),
        m_state(false),
        m_data(detail::resolve_data(m_e, kw...)),
        m_tape(m_arena) {
    m_kw.validate();  // E-KW-007, E-EMA-001, E-STOP-001
    if (dist::replicas* r = dist::active_replicas(); r && r->size() > 1) m_dist = r;  // one replica of a job
    if (m_kw.n_devs.value != 1)
      throw error("E-CUDA-011",
                  "n_devs = " + std::to_string(m_kw.n_devs.value) + " (from the " + to_string(m_kw.n_devs.source) +
                      ") asks for several devices, but this run uses the CPU backend, which trains on one",
                  "leave n_devs at 1, or build the trainer with nvcc and run it on the CUDA backend");
    (void)enter_program<E, Nitro>();  // cache_stats: compiled in (static init), entered here
    bind_device_fields();
    rng g(fold(m_kw.seed.value, 1));
    ps_type ps = m_params.view();
    st_type st = m_state.view();
    m_model.init(ps, st, g);
    const optim::program_options o{m_kw.gradient_clip_norm.value, m_kw.accum.value,
                                   horizon_of(m_data, m_kw.batch_size.value, m_kw.accum.value, m_kw.max_epochs.value, m_kw.max_steps.value)};
    auto sched = detail::resolve_schedule_map(m_e, kw...);
    using W0 = std::remove_cvref_t<decltype(m_kw.w0.value)>;
    static_assert(check_w0_weights<W0, has_keyword<"weights", Kw...>() || has_keyword<"checkpoint", Kw...>()>());  // E-CKPT-103
    if constexpr (std::is_same_v<W0, not_given> || is_weights_keyword_v<W0>) m_opt.emplace(m_e, m_params, sched, o);
    else if constexpr (is_tree_v<W0>) m_opt.emplace(m_e, m_params, sched, o, m_kw.w0.value);
    else (void)w0_must_be_a_tree_of_tensors<W0>::ok;
    if constexpr (optimizer_type::two_pass)
      if (m_dist)
        throw error("E-DIST-011",
                    "the optimizer takes two passes (SAM/ASAM), which data-parallel training does not reduce (the first pass's gradient "
                    "would be each rank's own)",
                    "train SAM in one process, or use a one-pass rule under mpirun");
    setup_run_directory();
    setup_checkpoints();
    if (m_dist) join_replicas();
  }
  Nitro(Nitro const&) = delete;  // a handle owns buffers and threads; build another instead
  Nitro& operator=(Nitro const&) = delete;

  // ---- what it holds --------------------------------------------------------------------------
  E const& experiment() const noexcept { return m_e; }
  model_type const& model() const noexcept { return m_model; }
  data_type const& data() const noexcept { return m_data; }
  ps_type params() const { return m_params.view(); }
  st_type state() const { return m_state.view(); }
  param_store_type& param_buffer() noexcept { return m_params; }
  state_store_type& state_buffer() noexcept { return m_state; }
  cpu_backend const& backend() const noexcept { return m_backend; }
  std::int64_t step() const noexcept { return m_opt->steps(); }  // optimizer steps (restored with the optimizer's state)
  int epoch() const noexcept { return m_epoch; }
  resolved<std::uint64_t> const& seed() const noexcept { return m_kw.seed; }
  resolved<int> const& max_epochs() const noexcept { return m_kw.max_epochs; }
  resolved<std::int64_t> const& batch_size() const noexcept { return m_kw.batch_size; }
  resolved<int> const& accum() const noexcept { return m_kw.accum; }
  resolved<double> const& gradient_clip_norm() const noexcept { return m_kw.gradient_clip_norm; }
  // Every run keyword and construction fact with its value and source (records() for the manifest and explain).
  keywords_type const& keywords() const noexcept { return m_kw; }
  double learning_rate() const noexcept { return m_opt->base_rate(); }  // the base: learning_rate(), else lr, else 1e-3
  // The optimizer program: groups, rules, schedules, its state for checkpoints, describe() for show.
  optimizer_type& optimizer() noexcept { return *m_opt; }
  optimizer_type const& optimizer() const noexcept { return *m_opt; }
  std::int64_t micro_steps() const noexcept { return m_opt->steps() * m_kw.accum.value + m_micro; }  // batches trained on
  // The run: its status (running until train() ends it), its table, the EMA and the monitor.
  run_status status() const noexcept { return m_run.status(); }
  std::string const& status_reason() const noexcept { return m_run.reason(); }
  run_history const& history() const noexcept { return m_run.history(); }  // nitro::history(h)
  ema_weights const& ema() const noexcept { return m_run.ema(); }
  early_stopper const& monitor() const noexcept { return m_run.monitor(); }
  // The optimizer steps train() runs to: max_steps, else max_epochs epochs.
  std::int64_t horizon() const noexcept { return m_opt->horizon(); }
  // The run's directory (empty: the handle keeps no record) — also what lets another handle name
  // this run: nitro::weights = h >> nitro::best.
  std::filesystem::path const& run_directory() const noexcept { return m_run_dir; }
  checkpointer const* checkpoints() const noexcept { return m_ckpt ? &*m_ckpt : nullptr; }  // null on ranks other than 0
  // The job this handle is one replica of (null: one process); only rank 0 writes the record.
  dist::replicas* distributed() const noexcept { return m_dist; }
  bool writes_records() const noexcept { return !m_dist || m_dist->writes(); }

  // The optimizer's part of show() (train/show.hpp): the clip threshold, the schedule keys with
  // their source and binding, one row per parameter group, the rules and where each scheduled
  // value lands. describe_handle(h, kw) fills the rest.
  void describe_optimizer(handle_description& d) const {
    optimizer_type const& o = *m_opt;
    d.gradient_clip_norm = o.gradient_clip_norm();
    for (auto const& s : o.schedule_infos()) d.schedules.push_back({s.key, to_string(m_kw.schedules.source), s.binds_to, s.curve});
    for (auto const& g : o.group_infos()) d.groups.push_back({g.name, g.params, g.rate, g.ratio, g.anchor, g.lambda, g.rule});
    d.optimizer = o.rule_summary();
    for (auto const& l : o.landings()) d.landings.push_back({l.key, l.field});
  }
  // What show(h) prints and the loggers receive at setup as the binding report.
  handle_description description() const {
    handle_description d = describe_handle(*this, m_kw);
    describe_optimizer(d);
    return d;
  }
  arena const& step_memory() const noexcept { return m_arena; }

  // ---- device scalars -------------------------------------------------------------------------
  // Writes a Device field between steps: the next step's hooks and kernels read the new value.
  // No new program, no rebuild. Naming a GraphConst or Host field is a compile error.
  template <auto Member, class V>
  void set_device(V value) {
    using F = typename detail::member_type_of<decltype(Member)>::type;
    if constexpr (is_graph_const_v<F>) (void)graph_const_is_not_writable<Member>::ok;
    else if constexpr (!is_device_v<F>) (void)host_field_is_not_on_the_device<Member>::ok;
    else (m_e.*Member).set(static_cast<typename F::value_type>(value));
  }
  // The same by name, checked at run time (for the command line and sweeps).
  void set_device(std::string_view field, double value) {
    bool done = false;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if (done || D::name.view() != field) return;
      if constexpr (D::residency == residency::device) {
        D::get(m_e).set(static_cast<typename D::type::value_type>(value));
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
    if (m_run.ended()) return {};  // a handle trains once: build another to train again
    try {
      return train_impl(opt);
    } catch (nitro::error const& x) {
      if (m_run.begun()) m_run.end(run_status::failed, x.what());
      throw;
    } catch (std::exception const& x) {
      if (m_run.begun()) m_run.end(run_status::failed, x.what());
      throw;
    }
  }

  // One micro-batch: forward, loss and backward, the gradient accumulating into the flat buffer;
  // every accum-th call ends with the optimizer step. With SAM, two passes (the gradient at w, then
  // at w + e). Returns the batch's loss (at w).
  double train_step(batch_type const& host_batch) {
    static_assert(binding_type::has_loss, "E-BIND-007: training needs a loss hook: `auto loss(auto const& outputs, LossIn const& in) const`");
    if (m_micro == 0) {
      m_opt->begin_step(m_e);  // schedules write this step's values: Device fields, group fields
      m_params.zero_grads();
    }
    step_context ctx{&m_arena, &m_tape, true, fold(fold(m_kw.seed.value, 3), static_cast<std::uint64_t>(micro_steps())), 0, &m_backend.ops()};
    context_scope scope(ctx);
    struct cleanup {  // the tape and the arena are empty after the micro-batch, also when a hook throws
      tape& t;
      arena& a;
      ~cleanup() { t.clear(); a.reset(); }
    } done{m_tape, m_arena};
    batch_type batch = transfer(host_batch, false);
    const bool last_micro = m_micro + 1 == m_kw.accum.value;
    if (m_dist && last_micro) m_dist->set_step(step() + 1);  // the step the sums started in backward belong to
    // data parallel: the last micro-batch's backward starts each group's sum once the group is complete
    tape::observe_scope overlap(m_tape, m_dist && last_micro && !optimizer_type::two_pass ? m_reducer->overlap(m_tape) : nullptr);
    double value = 0;
    if constexpr (optimizer_type::two_pass) {
      std::memset(m_opt->sam_grads(), 0, sizeof(float) * static_cast<std::size_t>(param_store_type::size));
      value = forward_backward(batch, m_opt->sam_grads(), true);
      m_opt->perturb();
      struct restore_weights {  // w is restored bit for bit, also when the second pass throws
        optimizer_type& o;
        ~restore_weights() { o.restore(); }
      } restore{*m_opt};
      ctx.counter = 0;  // the second pass draws the same dropout masks
      forward_backward(batch, m_params.grads(), false);
    } else {
      value = forward_backward(batch, m_params.grads(), true);
    }
    if (++m_micro == m_kw.accum.value) {
      float k = 1.0f;
      if (m_dist) k = m_reducer->finish();  // the gradients summed over the ranks; k = 1 / ranks: the mean over the global batch
      m_opt->update(k / static_cast<float>(m_kw.accum.value));
      if constexpr (state_store_type::size > 0)
        if (m_dist) dist::average_store(*m_dist, m_state, "the average of the model's state over the ranks");
      m_micro = 0;
    }
    return value;
  }

  // ---- checkpoints ----------------------------------------------------------------------------
  // A checkpoint now, whatever the policy says (a user's own loop, a signal handler's aftermath).
  void save_checkpoint() {
    if (!writes_records()) return;  // rank 0 writes it
    if (!m_ckpt)
      throw error("E-CKPT-017", "save_checkpoint() on a handle without a checkpointer",
                  "pass nitro::kw::checkpointer = nitro::checkpoint_policy{...}");
    if (m_micro != 0)
      throw error("E-CKPT-032", "save_checkpoint() in the middle of an accumulated step (" + std::to_string(m_micro) + " of " +
                                    std::to_string(m_kw.accum.value) + " micro-batches done)",
                  "save after a whole optimizer step: when micro_steps() is a multiple of accum");
    write_checkpoint();
  }

  // ---- evaluation -----------------------------------------------------------------------------
  // The split's metrics: what the metrics hook returns, reduced and finalized (finalize_metrics),
  // plus "loss" (mean over batches) when eval_loss says so. With eval_weights, evaluated with
  // those weights (the EMA, the best checkpoint, an average), the live weights left as they were.
  metric_values evaluate(std::string_view split_name) {
    using EW = std::remove_cvref_t<decltype(m_kw.eval_weights.value)>;
    if constexpr (!std::is_same_v<EW, not_given>) {
      const eval_weights_ref r = to_eval_weights_ref(m_kw.eval_weights.value);
      if (r.ema) {
        if (!m_run.begun() || !m_run.ema().enabled())
          throw error("E-CKPT-031", "eval_weights = nitro::ema, but this run keeps no EMA of its weights (yet)",
                      "give the run nitro::ema = 0.999 and train it, or evaluate with nitro::best");
        ema_scope with_average(m_run.ema(), m_params.values());
        return evaluate_live(split_name);
      }
      const std::vector<float> live_params(m_params.values(), m_params.values() + param_store_type::size);
      const std::vector<float> live_state(m_state.values(), m_state.values() + state_store_type::size);
      load_model(resolve(*r.ref, checkpoint_context(true)).load(), m_params, m_state);
      struct put_back {  // the live weights return, also when the evaluation throws
        Nitro& h;
        std::vector<float> const& p;
        std::vector<float> const& s;
        ~put_back() {
          std::copy(p.begin(), p.end(), h.m_params.values());
          std::copy(s.begin(), s.end(), h.m_state.values());
        }
      } back{*this, live_params, live_state};
      return evaluate_live(split_name);
    } else {
      return evaluate_live(split_name);
    }
  }

  // Forward alone on a batch that may lack labels; the outputs own their memory.
  template <class Batch>
  outputs_type predict(Batch const& host_batch) {
    step_context ctx{&m_arena, nullptr, false, 0, 0, &m_backend.ops()};
    context_scope scope(ctx);
    Batch batch = transfer(host_batch, true);
    ps_type ps = m_params.view();
    st_type st = m_state.view();
    auto&& fwd = call_hook<hook::forward>(m_e, batch, m_model, ps, st);
    outputs_type out = detail::clone_outputs(std::get<0>(fwd));
    m_arena.reset();
    return out;
  }

 private:
  // ---- the run --------------------------------------------------------------------------------
  std::vector<epoch_summary> train_impl(train_options const& opt) {
    auto const& split = m_data.split("train");
    const data::loader_options lo{m_kw.batch_size.value, true, true, 2, fold(m_kw.seed.value, 2)};
    if (m_dist) {  // this rank's shard of every global batch of the same permutation
      dist::shard_loader<batch_type> ld(split, lo, m_dist->rank(), m_dist->size());
      return train_loop(ld, opt);
    }
    data::loader<batch_type> ld(split, lo);
    return train_loop(ld, opt);
  }

  template <class Loader>
  std::vector<epoch_summary> train_loop(Loader& ld, train_options const& opt) {
    auto const& split = m_data.split("train");
    const std::int64_t bs = m_kw.batch_size.value;
    if (ld.batches_per_epoch() == 0)
      throw error("E-DATA-008",
                  "the train split has " + std::to_string(split.size()) + " samples, fewer than one batch of " + std::to_string(bs),
                  "use a smaller batch_size or more data");
    const std::int64_t k = m_kw.accum.value;
    if (ld.batches_per_epoch() < k)
      throw error("E-OPT-016",
                  "an epoch has " + std::to_string(ld.batches_per_epoch()) + " batches of " + std::to_string(bs) +
                      ", fewer than the accum = " + std::to_string(k) + " micro-batches one optimizer step needs",
                  "use a smaller accum or batch_size, or more data");
    const std::int64_t used = ld.batches_per_epoch() / k * k;  // the last batches % accum are not used
    m_used_batches = used;
    const std::int64_t steps_per_epoch = used / k;
    const std::int64_t horizon = m_opt->horizon();
    const bool has_valid = m_data.has("valid");
    if (m_kw.early_stop.value.enabled()) {  // the monitor must be a split training evaluates: valid (or valid_ema)
      monitor_spec const& m = m_kw.monitor.value;
      const bool evaluated = has_valid && (m.split() == "valid" || (m.split() == "valid_ema" && m_kw.ema.value.enabled()));
      if (!evaluated)
        throw error("E-STOP-002",
                    "early_stop (from the " + std::string(to_string(m_kw.early_stop.source)) + ") watches " + m.qualified() + ", but " +
                        (has_valid ? "training evaluates only the valid split (and valid_ema with an EMA)" : "the data has no valid split"),
                    has_valid ? "monitor a metric of valid, such as nitro::monitor = \"valid.loss\""
                              : "hold out a valid split (fashion_mnist({.valid = 5000}) or --set valid=5000), or leave early_stop at 0");
    }
    if (!m_run.begun()) begin_run(opt, steps_per_epoch, horizon);
    const std::int64_t first_step = step();

    std::vector<epoch_summary> summaries;
    bool stop = m_run.should_stop();
    for (; !stop && step() < horizon; ++m_epoch, m_epoch_batch = 0) {
      ld.start_epoch(static_cast<std::uint64_t>(m_epoch), m_epoch_batch);  // a resume starts mid-epoch
      const auto t0 = std::chrono::steady_clock::now();
      std::int64_t batches = m_epoch_batch, samples = 0, trained = 0;
      double loss_sum = 0, step_loss = 0;
      while (batches < used && step() < horizon) {
        if (m_micro == 0 && (m_dist ? m_agreed_stop : opt.stop && *opt.stop)) {
          m_run.request_stop("stop requested (SIGINT or SIGTERM) after step " + std::to_string(step()));
          break;
        }
        auto b = ld.next();
        if (!b) break;
        const double loss = train_step(*b);
        const std::int64_t n = detail::batch_samples(*b) * (m_dist ? m_dist->size() : 1);  // the global batch's samples
        loss_sum += loss;
        step_loss += loss;
        samples += n;
        ++trained;
        m_epoch_batch = ++batches;
        if (m_micro != 0) continue;  // mid-accumulation: no optimizer step yet
        if (m_dist) {  // every rank: the global batch's loss and the OR of the stop requests
          m_control->start(step_loss / double(k), opt.stop && *opt.stop);
          m_control->finish();
          const double global = m_control->loss() * double(k);
          loss_sum += global - step_loss;
          step_loss = global;
          m_agreed_stop = m_control->stop();
        }
        for (std::size_t i = 0; i < m_sched_slots.size(); ++i) m_run.schedules().set(m_sched_slots[i], m_opt->schedule_value(i));
        if (m_kw.diagnostics.value) note_diagnostics();  // every step: the run's last, partial window is logged too
        const bool go_on = m_run.after_step(step(), m_epoch + 1, batches / k, step_loss / double(k), m_params.values(), n * k);
        step_loss = 0;
        if (!go_on) break;  // diverged: no checkpoint of this step; the last good one stays
        // evaluate first, so a checkpoint of this step is ranked by this step's metrics
        const bool keep_on = !(has_valid && m_kw.eval_every.value > 0 && step() % m_kw.eval_every.value == 0) || evaluate_valid();
        if (m_ckpt && m_ckpt->due_after_step(step())) write_checkpoint();
        if (!keep_on) break;  // early stop
      }
      stop = m_run.should_stop();
      if (batches < used) break;  // the horizon, a stop or a divergence ended the epoch early
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      epoch_summary s{m_epoch + 1, trained ? loss_sum / double(trained) : 0.0, secs > 0 ? double(samples) / secs : 0.0, {}};
      bool go_on = !stop;
      if (has_valid && !stop) {
        if (m_valid_step != step()) go_on = evaluate_valid();
        s.valid = m_last_valid;
      }
      if (m_ckpt && !stop && m_ckpt->due_after_epoch(m_epoch + 1)) write_checkpoint();  // position: next epoch, batch 0
      summaries.push_back(std::move(s));
      if (!go_on) {  // early stop after this epoch
        stop = true;
        ++m_epoch;
        m_epoch_batch = 0;
        break;
      }
    }
    const bool diverged = m_run.status() == run_status::diverged;
    if (!diverged && has_valid && step() > first_step && m_valid_step != step()) (void)evaluate_valid();  // where the run ended
    if (m_ckpt && !diverged && step() > first_step) {
      auto latest = m_ckpt->index().latest();
      if (!latest || latest->step != step()) write_checkpoint();  // the end of the run is always a checkpoint
    }
    if (m_dist) m_dist->barrier("the end of training (rank 0's last checkpoint written)");  // restore_best reads it
    restore_best();
    const int epoch_now = std::max(1, m_epoch_batch > 0 ? m_epoch + 1 : m_epoch);
    for (auto const& name : opt.evaluate_after) m_run.record_eval(step(), epoch_now, name, evaluate(name));
    m_run.end();
    return summaries;
  }

  // The run begins: loggers (with the binding report), the run control, scheduled values to log,
  // and what a weights or resume file brought (the EMA, the monitor's best).
  void begin_run(train_options const& opt, std::int64_t steps_per_epoch, std::int64_t horizon) {
    run_info info;
    info.experiment = program_key<E>();
    info.binding_report = show_text(description());
    info.metadata_json = m_metadata_json;
    info.dir = m_run_dir;
    info.steps_per_epoch = steps_per_epoch;
    info.total_steps = horizon;
    info.max_epochs = static_cast<int>(steps_per_epoch > 0 ? (horizon + steps_per_epoch - 1) / steps_per_epoch : 0);
    info.batch_size = m_kw.batch_size.value;
    info.start_step = step();
    if (!writes_records()) info.dir.clear();  // only rank 0 writes the record
    if (!info.dir.empty() && !std::filesystem::exists(m_run_dir / "binding_report.txt"))
      atomic_write(m_run_dir / "binding_report.txt", info.binding_report, "binding report");  // the record's copy (the CLI writes a longer one first)
    logger_set none;  // the other ranks log nothing: rank 0 reports the agreed values
    none.defaults_added();
    m_run = run_control(run_control_options_from(m_kw),
                        writes_records() ? with_default_loggers(to_logger_set(m_kw.logger.value), info, opt.console) : std::move(none));
    m_sched_slots.clear();
    for (std::size_t i = 0; i < optimizer_type::schedule_count; ++i) m_sched_slots.push_back(m_run.schedules().declare(m_opt->schedule_key(i)));
    if (m_kw.diagnostics.value) {
      m_diag_grad = m_run.extras().declare("grad_norm");
      m_diag_param = m_run.extras().declare("param_norm");
    }
    m_run.begin(info, m_params.values(), param_store_type::size);
    if (!m_loaded_ema.empty() && m_run.ema().enabled()) {
      std::copy(m_loaded_ema.begin(), m_loaded_ema.end(), m_run.ema().values());
      m_run.ema().set_updates(m_loaded_ema_updates);
    }
    m_loaded_ema = {};
    if (m_loaded_monitor) m_run.monitor().restore(m_loaded_monitor->best, m_loaded_monitor->best_step, m_loaded_monitor->wait);
  }

  // The valid split with the live weights (and, with an EMA, with the averaged weights as
  // "valid_ema" first). Feeds the monitor; false when early stopping ends the run.
  bool evaluate_valid() {
    if (m_run.ema().enabled()) {
      metric_values averaged;
      {
        ema_scope with_average(m_run.ema(), m_params.values());
        averaged = evaluate_live("valid");
      }
      m_run.after_eval(step(), m_epoch + 1, "valid_ema", averaged);
    }
    m_last_valid = evaluate_live("valid");
    m_valid_step = step();
    return m_run.after_eval(step(), m_epoch + 1, "valid", m_last_valid);
  }

  // The global norms of the gradient (before clipping) and of the weights: the diagnostics keyword.
  void note_diagnostics() {
    double g = 0, p = 0;
    float const* gr = m_params.grads();
    float const* w = m_params.values();
    for (std::int64_t i = 0; i < param_store_type::size; ++i) {
      g += double(gr[i]) * double(gr[i]);
      p += double(w[i]) * double(w[i]);
    }
    // the gradient the update used: the mean over micro-batches (and over the ranks, whose gradients were summed)
    const double scale = 1.0 / double(m_kw.accum.value) / double(m_dist ? m_dist->size() : 1);
    m_run.extras().set(m_diag_grad, std::sqrt(g) * scale);
    m_run.extras().set(m_diag_param, std::sqrt(p));
  }

  metric_values evaluate_live(std::string_view split_name) {
    auto const& split = m_data.split(split_name);
    if (m_dist) {  // this rank's block of the split, the metrics reduced over the ranks by the pair rules
      const auto part = dist::split_shard(split, m_dist->rank(), m_dist->size(), m_kw.batch_size.value);  // whole batches: one process's
      data::loader<batch_type> ld(part, {m_kw.batch_size.value, false, false, 2, 0});
      ld.start_epoch(0);
      dist::metric_totals<metrics_struct> totals;
      while (auto b = ld.next()) eval_step(*b, totals);
      return finalize_metrics(m_e, totals.reduce(*m_dist, metrics_residency_of<hook::metrics>(m_e)), split_name);
    }
    data::loader<batch_type> ld(split, {m_kw.batch_size.value, false, false, 2, 0});
    ld.start_epoch(0);
    metric_accumulator acc(metrics_residency_of<hook::metrics>(m_e));
    acc.reserve_samples(split.size());  // concat_of: no growth per batch
    while (auto b = ld.next()) eval_step(*b, acc);
    return finalize_metrics(m_e, acc.result(), split_name);
  }

  // forward -> loss -> backward into `grads` (a buffer laid out like the parameters); the new state
  // is kept when `keep_state`. Returns the loss.
  double forward_backward(batch_type const& batch, float* grads, bool keep_state) {
    ps_type ps = m_params.view(m_tape, grads);
    st_type st = m_state.view();
    auto&& fwd = call_hook<hook::forward>(m_e, batch, m_model, ps, st);
    auto const& outputs = std::get<0>(fwd);
    detail::check_outputs_batch_last(outputs, detail::batch_samples(batch));
    auto loss = call_hook<hook::loss>(m_e, batch, outputs);
    if constexpr (!detail::is_tensor<std::remove_cvref_t<decltype(loss)>>::value) {
      (void)loss_must_return_tensor<hook::loss, returns<decltype(loss)>>::ok;
      return 0;
    } else {
      const double value = static_cast<double>(loss.item());
      // inside train() the run control decides (status diverged); a step called on its own throws
      if (keep_state && !m_run.begun() && m_kw.check_divergence.value && !std::isfinite(value))
        throw error("E-TRAIN-001", "the loss is " + std::to_string(value) + " at step " + std::to_string(step() + 1),
                    "lower the learning rate, clip gradients (gradient_clip_norm), or check the data for NaN");
      if (loss.requires_grad()) m_tape.backward<float>(loss.var(), 1.0f);
      if (keep_state) m_state.assign(std::get<1>(fwd));
      m_tape.clear();
      return value;
    }
  }

  // What the metrics hook returns (void without one): the struct dist::metric_totals reduces.
  static auto metrics_struct_of() {
    if constexpr (binding_type::has_metrics)
      return std::type_identity<std::remove_cvref_t<decltype(call_hook<hook::metrics>(std::declval<E const&>(), std::declval<batch_type const&>(),
                                                                                       std::declval<outputs_type const&>()))>>{};
    else return std::type_identity<void>{};
  }
  using metrics_struct = typename decltype(metrics_struct_of())::type;

  // A replica of a data-parallel job: the same run on every rank (E-DIST-007), then rank 0's
  // parameters, state, optimizer state and position everywhere (after weights or resume).
  void join_replicas() {
    m_reducer.emplace(*m_dist, m_params);
    m_control.emplace(*m_dist);
    dist::require_same_run(*m_dist, {m_kw.seed.value, m_kw.batch_size.value, m_kw.accum.value, param_store_type::size,
                                     m_data.has("train") ? m_data.split("train").size() : 0});
    dist::broadcast_store(*m_dist, m_params, "the broadcast of rank 0's parameters");
    if constexpr (state_store_type::size > 0) dist::broadcast_store(*m_dist, m_state, "the broadcast of rank 0's model state");
    dist::broadcast_entries(*m_dist, m_opt->state_tensors(), "the broadcast of rank 0's optimizer state");
    std::int64_t at[2] = {m_epoch, m_epoch_batch};
    m_dist->broadcast(at, sizeof at, "the broadcast of rank 0's position in the epochs");
    m_epoch = static_cast<int>(at[0]);
    m_epoch_batch = at[1];
  }

  // Optimizer steps in max_epochs epochs (or max_steps): the horizon the schedules are made for.
  static std::int64_t horizon_of(data_type const& d, std::int64_t batch, int accum, int epochs, std::int64_t max_steps) {
    if (max_steps > 0) return max_steps;
    if (!d.has("train") || batch <= 0 || accum <= 0 || epochs <= 0) return 0;
    return static_cast<std::int64_t>(epochs) * (d.split("train").size() / batch / accum);
  }

  template <class Acc>  // metric_accumulator, or dist::metric_totals
  void eval_step(batch_type const& host_batch, Acc& acc) {
    step_context ctx{&m_arena, nullptr, false, 0, 0, &m_backend.ops()};
    context_scope scope(ctx);
    batch_type batch = transfer(host_batch, false);
    ps_type ps = m_params.view();
    st_type st = m_state.view();
    auto&& fwd = call_hook<hook::forward>(m_e, batch, m_model, ps, st);
    auto const& outputs = std::get<0>(fwd);
    if constexpr (binding_type::has_loss) {
      if (evaluation_reports_loss(binding_type::has_loss, binding_type::has_metrics, m_kw.eval_loss.value))
        acc.add_mean("loss", mean_of(static_cast<double>(call_hook<hook::loss>(m_e, batch, outputs).item()), 1.0));  // add_loss
    }
    if constexpr (binding_type::has_metrics) acc.add(call_hook<hook::metrics>(m_e, batch, outputs));
    m_arena.reset();
  }

  // ---- records and checkpoints ------------------------------------------------------------------
  // run_ref, else (with a checkpointer) a new <run_dir>/<experiment>-<time>-<id>, else no record.
  void setup_run_directory() {
    using RR = std::remove_cvref_t<decltype(m_kw.run_ref.value)>;
    std::optional<run_reference> ref;
    if constexpr (!std::is_same_v<RR, not_given>) ref = to_run_reference(m_kw.run_ref.value, m_kw.run_dir.value);
    if (ref) {
      m_run_dir = ref->dir;
      m_metadata_json = ref->metadata_json.empty() ? std::string("{}") : ref->metadata_json;
      std::error_code ec;
      if (writes_records()) std::filesystem::create_directories(m_run_dir, ec);
      if (ec)
        throw error("E-REC-004", "cannot create the run directory '" + m_run_dir.string() + "' (" + ec.message() + ")",
                    "pass a writable run_dir or run_ref");
    } else if (checkpoint_policy_given()) {
      if (writes_records()) m_run_dir = detail::make_run_directory(m_kw.run_dir.value, detail::run_stem(program_key<E>()));
      if (m_dist) {  // rank 0's new directory is every rank's (restore_best reads its checkpoints)
        std::string d = m_run_dir.string();
        dist::broadcast_string(*m_dist, d, "the run directory");
        m_run_dir = d;
      }
    }
  }

  // The checkpointer keyword's policy, when it gives one (a policy, or a non-empty optional of one).
  std::optional<checkpoint_policy> checkpoint_policy_of() const {
    using CK = std::remove_cvref_t<decltype(m_kw.checkpointer.value)>;
    if constexpr (std::is_same_v<CK, checkpoint_policy>) return m_kw.checkpointer.value;
    else if constexpr (std::is_same_v<CK, std::optional<checkpoint_policy>>) return m_kw.checkpointer.value;
    else if constexpr (std::is_same_v<CK, framework_default>) return std::nullopt;
    else {
      (void)checkpointer_must_be_a_policy<CK>::ok;
      return std::nullopt;
    }
  }
  bool checkpoint_policy_given() const { return checkpoint_policy_of().has_value(); }

  resolve_context checkpoint_context(bool bare_is_own) const {
    return {.runs_dir = m_kw.run_dir.value, .own_run = m_run_dir, .bare_is_own = bare_is_own};
  }

  void setup_checkpoints() {
    // the checkpointer: its monitor defaults to the run's monitor keyword
    if (auto policy = checkpoint_policy_of(); policy && writes_records()) {  // rank 0 writes the checkpoints
      checkpoint_policy p = std::move(*policy);
      if (p.monitor.empty()) {
        p.monitor = m_kw.monitor.value.qualified();
        p.mode = m_kw.monitor.value.mode;
      }
      m_ckpt.emplace(m_run_dir / "checkpoints", std::move(p));
    }
    // weights (or `checkpoint = path`, its deprecated spelling: W-CKPT-001)
    using W = std::remove_cvref_t<decltype(m_kw.weights.value)>;
    if constexpr (!std::is_same_v<W, not_given>) {
      std::optional<weights_ref> ref;
      if constexpr (detail::is_optional_v<W>) {
        if (m_kw.weights.value) ref = to_weights_ref(*m_kw.weights.value);
      } else {
        ref = to_weights_ref(m_kw.weights.value);  // E-CKPT-102 when it names nothing
      }
      if (ref) {
        if (m_kw.checkpoint_spelling) ref = weights_ref::deprecated_checkpoint_path(ref->path());
        safetensors_file file = resolve(*ref, checkpoint_context(false)).load();  // one file, or the average
        load_model(file, m_params, m_state);                                      // params./state. or a foreign file's keypaths
        take_ema(file);
        using W0 = std::remove_cvref_t<decltype(m_kw.w0.value)>;
        if constexpr (is_weights_keyword_v<W0>) m_opt->capture_w0();  // w0 = nitro::weights
      }
    }
    // resume: everything the next step depends on
    using R = std::remove_cvref_t<decltype(m_kw.resume.value)>;
    if constexpr (detail::is_optional_v<R>) {
      if (m_kw.resume.value) resume_from(to_resume_ref(*m_kw.resume.value));  // an empty optional: a fresh start
    } else if constexpr (!std::is_same_v<R, not_given>) {
      resume_from(to_resume_ref(m_kw.resume.value));
    }
  }

  // Everything the next step depends on, from one checkpoint.
  void resume_from(resume_ref const& ref) {
    safetensors_file file = resolve(ref, checkpoint_context(false)).load();
    const checkpoint_info info = read_checkpoint_info(file);  // E-CKPT-015: not a nitro checkpoint
    const resume_point at = resume_point_of(info, m_kw.seed.value, m_kw.batch_size.value, file.source());  // E-CKPT-030
    load_store(file, "params.", m_params);
    load_store(file, "state.", m_state);
    if (m_kw.restore_optimizer.value)  // false: the optimizer and its schedules restart
      m_opt->load_state(read_named(file, m_opt->state_tensors(), "optim."));
    m_epoch = static_cast<int>(at.epoch);
    m_epoch_batch = at.batch_in_epoch;
    for (auto const& [key, v] : info.metrics)
      if (key.rfind("valid.", 0) == 0) m_last_valid.scalars[key.substr(6)] = v;
    if (!info.metrics.empty()) m_valid_step = info.step;
    take_ema(file);
    if (info.extra.contains("ema_updates")) m_loaded_ema_updates = info.extra["ema_updates"].get<std::int64_t>();
    if (info.extra.contains("monitor_best_step"))
      m_loaded_monitor = monitor_state{info.extra["monitor_best"].is_number() ? info.extra["monitor_best"].get<double>() : m_kw.monitor.value.worst(),
                                       info.extra["monitor_best_step"].get<std::int64_t>(), info.extra["monitor_wait"].get<int>()};
  }

  // An EMA in the file (ema.<keypath>) is kept for the run's EMA when load_ema (default true).
  // Given explicitly as true, a file without one is an error; by default it is simply absent.
  void take_ema(safetensors_file const& file) {
    if (!m_kw.load_ema.value) return;
    const bool has = std::any_of(file.entries().begin(), file.entries().end(), [](auto const& e) { return e.name.rfind("ema.", 0) == 0; });
    if (!has) {
      if constexpr (!param_store_type::leaves.empty())
        if (m_kw.load_ema.source == keyword_source::keyword) (void)file.at("ema." + std::string(param_store_type::leaves[0].keypath));  // E-CKPT-011
      return;
    }
    param_store_type ema(false);
    load_store(file, "ema.", ema);
    m_loaded_ema.assign(ema.values(), ema.values() + param_store_type::size);
  }

  void write_checkpoint() {
    if (!m_ckpt) return;  // a rank other than 0
    safetensors_writer w;  // holds pointers: everything below stays alive until save()
    add_store(w, "params.", m_params);
    add_store(w, "state.", m_state);
    auto opt = m_opt->state_tensors();  // views of the program's buffers
    add_named(w, opt);
    const bool ema = m_run.begun() && m_run.ema().enabled();
    if (ema)
      for (auto const& li : param_store_type::leaves) w.add("ema." + std::string(li.keypath), m_run.ema().values() + li.offset, li.shape());
    // the position: a checkpoint after an epoch's last batch starts the next epoch
    const bool epoch_done = m_used_batches > 0 && m_epoch_batch >= m_used_batches;
    checkpoint_info info{.step = step(),
                         .epoch = epoch_done ? m_epoch + 1 : m_epoch,
                         .batch_in_epoch = epoch_done ? 0 : m_epoch_batch,
                         .seed = m_kw.seed.value,
                         .batch_size = m_kw.batch_size.value};
    if (m_valid_step == step())  // metrics rank a checkpoint only when they are its own step's
      for (auto const& [key, v] : m_last_valid.scalars) info.metrics["valid." + key] = v;
    try {
      auto meta = nlohmann::json::parse(m_metadata_json);
      info.selection = meta.is_object() && meta.contains("selection") ? meta["selection"] : meta;
    } catch (nlohmann::json::exception const&) {
      info.selection = nlohmann::json::object();
    }
    if (!info.selection.is_object()) info.selection = nlohmann::json::object();
    if (!info.selection.contains("program")) info.selection["program"] = program_key<E>();
    for (auto const& g : m_opt->group_infos())
      info.groups[g.name] = {{"leaves", g.leaves}, {"params", g.params}, {"rule", g.rule}, {"anchor", g.anchor}};
    if (ema) info.extra["ema_updates"] = m_run.ema().updates();
    if (m_run.begun() && m_run.monitor().best_step() >= 0) {
      info.extra["monitor_best"] = m_run.monitor().best();
      info.extra["monitor_best_step"] = m_run.monitor().best_step();
      info.extra["monitor_wait"] = m_run.monitor().wait();
    }
    m_ckpt->save(w, std::move(info));  // file, then index, then pruning; all atomic
  }

  // restore_best: where the handle ends — its own best checkpoint (true), or a reference (a bare
  // one names this run: Average(Last(10))).
  void restore_best() {
    using RB = std::remove_cvref_t<decltype(m_kw.restore_best.value)>;
    if constexpr (!std::is_same_v<RB, not_given>) {
      if (auto ref = to_restore_ref(m_kw.restore_best.value)) {
        safetensors_file file = resolve(*ref, checkpoint_context(true)).load();
        load_model(file, m_params, m_state);
      }
    }
  }

  // Moves the declared fields to the device; the others stay where they are, untouched.
  template <class Batch>
  Batch transfer(Batch const& host, bool forward_only) {
    Batch dev = host;
    boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
      using Key = std::remove_cvref_t<decltype(boost::hana::first(acc))>;
      constexpr bool move = [&] {
        if constexpr (std::is_same_v<Batch, batch_type>) return binding_type::template transferred<Key>;
        else return declares_field<hook_input<hook::forward, E, Batch, model_type, ps_type, st_type>, Key>();
      }();
      if (forward_only && !declares_field<hook_input<hook::forward, E, Batch, model_type, ps_type, st_type>, Key>()) return;
      if constexpr (move) {
        auto& f = boost::hana::second(acc)(dev);
        f = m_backend.to_device(boost::hana::to<char const*>(boost::hana::first(acc)), f);
      }
    });
    return dev;
  }

  void bind_device_fields() {
    std::size_t n = 0;
    for_each_field<E>([&](auto d) { if constexpr (decltype(d)::residency == residency::device) ++n; });
    m_device_block = std::make_unique<double[]>(n ? n : 1);
    std::size_t i = 0;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if constexpr (D::residency == residency::device) {
        using V = typename D::type::value_type;
        static_assert(sizeof(V) <= sizeof(double) && alignof(V) <= alignof(double));
        D::get(m_e).bind_slot(reinterpret_cast<V*>(&m_device_block[i++]));
      }
    });
  }

  struct monitor_state {
    double best;
    std::int64_t best_step;
    int wait;
  };

  E m_e;
  keywords_type m_kw;  // every run keyword and construction fact, with its source
  model_type m_model;
  param_store_type m_params;
  state_store_type m_state;
  data_type m_data;
  std::optional<optimizer_type> m_opt;
  std::unique_ptr<double[]> m_device_block;
  cpu_backend m_backend;
  arena m_arena;
  tape m_tape;
  int m_micro = 0;  // micro-batches into the current optimizer step
  int m_epoch = 0;  // epochs completed (the epoch in progress, from 0)
  // the run
  run_control m_run;  // EMA, early stop, divergence, log gate, autolog, loggers, history
  std::vector<std::size_t> m_sched_slots;
  std::size_t m_diag_grad = 0, m_diag_param = 0;
  metric_values m_last_valid;   // the latest valid evaluation: what a checkpoint of its step records
  std::int64_t m_valid_step = -1;
  // records and checkpoints
  std::filesystem::path m_run_dir;     // empty: no record
  std::string m_metadata_json = "{}";  // the record's metadata (the selection), from run_ref
  std::optional<checkpointer> m_ckpt;
  std::int64_t m_epoch_batch = 0;   // loader batches of m_epoch already trained (the mid-epoch position)
  std::int64_t m_used_batches = 0;  // batches per epoch train() uses (rounded down to accum)
  std::vector<float> m_loaded_ema;  // an EMA read by weights/resume, handed to the run when it begins
  std::int64_t m_loaded_ema_updates = 0;
  std::optional<monitor_state> m_loaded_monitor;
  // data parallel (dist/data_parallel.hpp): all empty in one process
  dist::replicas* m_dist = nullptr;
  std::optional<dist::gradient_reducer<param_store_type>> m_reducer;
  std::optional<dist::step_control> m_control;
  bool m_agreed_stop = false;  // some rank asked to stop at the last step
};

template <class E, class... Kw>
Nitro(E, Kw...) -> Nitro<E, Kw...>;

}  // namespace nitro
