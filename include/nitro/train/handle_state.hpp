// nitro/train/handle_state.hpp — what a handle holds, and the checks that run before it holds anything.
//
// nitro::Nitro (train/nitro.hpp) is a façade over four parts, each its own header, each a set of
// function templates over this state: the step (train/step.hpp), evaluation (train/evaluation.hpp),
// checkpointing (train/checkpointing.hpp) and the loop (train/loop.hpp). The state is the one place
// the handle's types are computed from the experiment and its keywords (model, batch, binding,
// parameter layout, optimizer program, backend) and the one place its buffers live. The parts
// reach it as `s`, and nothing outside train/ names it: it is detail, the façade is the interface.
//
// The static_asserts come first, before any type is computed from the experiment, so a trainer
// that is not adapted, lacks build_model() or passes an unknown keyword reads its coded sentence
// before anything else.
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/core/cache_stats.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/data/dataset.hpp"
#include "nitro/data/loader.hpp"
#include "nitro/dist/gradients.hpp"
#include "nitro/dist/metrics.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/optim/program.hpp"
#include "nitro/optim/schedule_map.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/run_lock.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/tensor/arena.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/train/device_params.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/train/run_control.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>

#include <csignal>      // sig_atomic_t: a stop asked from outside
#include <cstdint>      // int64_t
#include <filesystem>   // the run directory
#include <memory>       // device-scalar block
#include <optional>     // the optimizer program, the checkpointer
#include <string>       // names
#include <string_view>  // split names
#include <type_traits>  // traits
#include <utility>      // move, index_sequence
#include <vector>       // slots

namespace nitro {
// The construction fact `data`: a keyword without an accessor. Spelled nitro::kw::data, since
// nitro::data is the namespace of data sets.
namespace kw { inline constexpr keyword<"data"> data{}; }

template <class Experiment>
struct experiment_has_no_data {
  static_assert(always_false<Experiment>,
                "E-DATA-007: the handle found no data. Fix: pass nitro::data = ..., define `auto build_data() const`, or give "
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

namespace detail {

// The handle's types and buffers. Built in the order the members are declared: the experiment, its
// keywords, the model, the flat parameter and state buffers, the data, the step's memory.
template <class E, class... Kw>
struct handle_state {
  static_assert(experiment<E>,
                "E-REFL-005: nitro::Nitro(e, ...) is given an experiment type that is not adapted. Fix: add NITRO_EXPERIMENT(Name, fields...) after the struct.");
  static_assert(checks_evaluated<experiment_traits<E>::complete>);
  // A failing gate (not checks_evaluated): clang then stops compiling the handle, which would only
  // add errors about the bad argument; the coded error naming it comes first.
  static_assert([]<std::size_t... I>(std::index_sequence<I...>) { return (check_run_keyword<Kw, I + 2>() && ...); }(std::index_sequence_for<Kw...>{}),
                "E-KW-001: an argument of nitro::Nitro(e, ...) is wrong (the error above names it and its position). Fix: as it says.");
  static_assert(hook::build_model::present<E>,
                "E-BIND-009: the experiment has no build_model() hook. Fix: add `auto build_model() const { return "
                "nitro::nn::chain(...); }`.");

  using experiment_type = E;
  using keywords_type = run_keywords<E, Kw...>;
  using model_type = std::remove_cvref_t<decltype(std::declval<E const&>().build_model())>;
  static_assert(nn::layer<model_type>, "E-BIND-010: build_model() returns something that is not a nitro layer. Fix: return nitro::nn::chain(...), a dense, ...");
  using param_spec = typename model_type::param_spec;
  using state_spec = typename model_type::state_spec;
  using ps_type = nn::params_t<param_spec, float>;
  using st_type = nn::params_t<state_spec, float>;
  using data_type = std::remove_cvref_t<decltype(resolve_data(std::declval<E const&>(), std::declval<Kw const&>()...))>;
  using batch_type = typename data_type::batch_type;
  using binding_type = binding<E, batch_type, model_type, ps_type, st_type>;
  using outputs_type = typename binding_type::outputs;
  using layout_type = group_layout<E, param_spec>;
  using param_store_type = param_store<param_spec, float, layout_type>;
  using state_store_type = param_store<state_spec>;
  using schedules_type = decltype(resolve_schedule_map(std::declval<E const&>(), std::declval<Kw const&>()...));
  using optimizer_type = optim::program<E, param_spec, schedules_type>;
  using backend_type = backend_of_t<std::remove_cvref_t<decltype(std::declval<keywords_type const&>().device.value)>>;
  static_assert(checks_evaluated<binding_type::loss_fits, binding_type::metrics_fits>);  // E-BIND-001, 003, 005 name the hook and field
  // The keywords and the hooks bind (each mistake has printed its coded error): nitro::main compiles
  // its other programs only then, so a mistake they share is told once, not once per program.
  static constexpr bool binds = binding_type::forward_fits && binding_type::loss_fits && binding_type::metrics_fits;

  handle_state(E e, Kw const&... kw)
      : m_e(std::move(e)),
        m_kw(m_e, kw...),
        m_model(m_e.build_model()),
        m_params(true),
        m_state(false),
        m_data(resolve_data(m_e, kw...)),
        m_backend(backend_of<std::remove_cvref_t<decltype(m_kw.device.value)>>::make(m_kw.device.value)),
        m_arena(m_backend.ops().memory()),
        m_tape(m_arena, m_arena.device() == device_kind::cpu ? m_arena : m_closure_arena),
        m_device(m_backend.ops().memory(), optimizer_type::two_pass) {}

  std::int64_t step() const noexcept { return m_opt->steps(); }  // optimizer steps (restored with the optimizer's state)
  std::int64_t micro_steps() const noexcept { return m_opt->steps() * m_kw.accum.value + m_micro; }  // batches trained on
  bool writes_records() const noexcept { return !m_dist || m_dist->writes(); }  // only rank 0 writes the record
  int ranks() const noexcept { return m_dist ? m_dist->size() : 1; }  // processes in the job (1: one process)

  // The context a step (training) or an evaluation (not) runs in: the arena, the tape, the seed of
  // its random streams and the backend's kernels.
  step_context context(bool training, std::uint64_t seed) {
    return step_context{&m_arena, training ? &m_tape : nullptr, training, seed, 0, &m_backend.ops()};
  }

  // The parameters and state forward reads: the stores' own on the host; on a device, their copy
  // there (train/device_params.hpp), with the step's gradient buffer beside it.
  ps_type param_view() const { return m_device.on_device() ? m_device.view() : m_params.view(); }
  ps_type param_view(tape& tp, float* grads) { return m_device.on_device() ? m_device.view(tp, grads) : m_params.view(tp, grads); }
  st_type state_view() const { return m_device.on_device() ? m_device.state_view() : m_state.view(); }
  // Where a step's gradient accumulates (the optimizer reads the host's: gradients_to_host).
  float* step_grads() noexcept { return m_device.on_device() ? m_device.grads() : m_params.grads(); }
  // Before forward on a device: the host's values and state there (either alone when the other
  // is already there). Nothing on the host.
  void upload_params(bool with_values = true, bool with_state = true) {
    if (m_device.on_device()) m_device.upload(m_params, m_state, with_values, with_state);
  }
  void zero_step_grads() {
    if (m_device.on_device()) m_device.zero(m_device.grads());
    else m_params.zero_grads();
  }
  // At the step's last micro-batch: the gradient the optimizer reads, in the host's buffer.
  void gradients_to_host() {
    if (m_device.on_device()) m_device.download(m_device.grads(), m_params.grads());
  }
  // A training forward's new state, kept in the host's store.
  void keep_state(st_type const& fresh) {
    if (m_device.on_device()) m_device.keep_state(m_state, fresh);
    else m_state.assign(fresh);
  }

  // How the handle's loaders read a split — the one place it is said (the loop, evaluation and
  // show() read it): training shuffles from the run's seed and keeps whole batches; evaluation
  // reads every sample in order. Both gather batches ahead on the loader's thread.
  data::loader_options loader_options_for(std::string_view split) const {
    const bool training = split == "train";
    return {.batch_size = m_kw.batch_size.value, .shuffle = training, .drop_last = training, .prefetch = 2,
            .seed = training ? data::train_order_seed(m_kw.seed.value) : 0};
  }

  resolve_context checkpoint_context(bool bare_is_own) const {
    return {.runs_dir = m_kw.run_dir.value, .own_run = m_run_dir, .bare_is_own = bare_is_own};
  }

  // A step's memory, freed when its micro-batch (or evaluation batch) ends: the arena on the
  // backend's device, and the tape's closures when those live apart from it.
  void reset_step_memory() {
    m_arena.reset();
    m_closure_arena.reset();
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

  // The experiment's Device fields read and write their slots of one block of device scalars.
  void bind_device_fields() {
    std::size_t n = 0;
    for_each_field<E>([&](auto d) { if constexpr (decltype(d)::residency == residency::device) ++n; });
    m_device_block = std::make_unique<double[]>(n ? n : 1);
    std::size_t i = 0;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if constexpr (D::residency == residency::device) {
        using V = typename D::type::value_type;
        static_assert(sizeof(V) <= sizeof(double) && alignof(V) <= alignof(double), "nitro invariant: a Device<T> is arithmetic, so it fits one 8-byte slot");
        D::get(m_e).bind_slot(reinterpret_cast<V*>(&m_device_block[i++]));
      }
    });
  }

  // Optimizer steps in max_epochs epochs (or max_steps): the horizon the schedules are made for.
  static std::int64_t horizon_of(data_type const& d, std::int64_t batch, int accum, int epochs, std::int64_t max_steps) {
    if (max_steps > 0) return max_steps;
    if (!d.has("train") || batch <= 0 || accum <= 0 || epochs <= 0) return 0;
    return static_cast<std::int64_t>(epochs) * (d.split("train").size() / batch / accum);
  }

  // What the metrics hook returns (void without one): the struct dist::metric_totals reduces.
  static auto metrics_struct_of() {
    if constexpr (binding_type::has_metrics)
      return std::type_identity<std::remove_cvref_t<decltype(call_hook<hook::metrics>(std::declval<E const&>(), std::declval<batch_type const&>(),
                                                                                       std::declval<outputs_type const&>()))>>{};
    else return std::type_identity<void>{};
  }
  using metrics_struct = typename decltype(metrics_struct_of())::type;

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
  backend_type m_backend;
  arena m_arena;          // the step's tensors, gradients and scratch, in the backend's memory
  arena m_closure_arena;  // the tape's closures when the backend's memory is not the host's
  tape m_tape;
  device_params<param_store_type, state_store_type> m_device;  // the stores' copy on a device (none on the host)
  int m_micro = 0;  // micro-batches into the current optimizer step
  int m_epoch = 0;  // epochs completed (the epoch in progress, from 0)
  // the run
  run_control m_run;  // EMA, early stop, divergence, log gate, autolog, loggers, history
  std::vector<std::size_t> m_sched_slots;
  std::size_t m_diag_grad = 0, m_diag_param = 0;
  metric_values m_last_valid;   // the latest valid evaluation: what a checkpoint of its step records
  std::int64_t m_valid_step = -1;
  // records and checkpoints
  std::filesystem::path m_run_dir;     // empty: no record (or a new one not yet opened: open_record)
  bool m_new_record = false;           // a checkpointer without run_ref: a new run directory, named when it opens
  std::string m_metadata_json = "{}";  // the record's metadata (the selection), from run_ref
  std::optional<checkpointer> m_ckpt;
  run_lock m_run_lock;                 // held while this handle writes m_run_dir (rank 0): one writer a run
  std::vector<std::string> m_resume_skipped;  // damaged checkpoints a resume of `latest` passed over ("file: why")
  std::int64_t m_epoch_batch = 0;   // loader batches of m_epoch already trained (the mid-epoch position)
  std::int64_t m_used_batches = 0;  // batches per epoch train() uses (rounded down to accum)
  std::vector<float> m_loaded_ema;  // an EMA read by weights/resume, handed to the run when it begins
  std::int64_t m_loaded_ema_updates = 0;
  std::optional<monitor_state> m_loaded_monitor;
  // data parallel (the replicas construction fact, dist/replicas.hpp): all empty in one process
  dist::replicas* m_dist = nullptr;
  std::optional<dist::gradient_reducer<param_store_type>> m_reducer;
  std::optional<dist::step_control> m_control;
  bool m_agreed_stop = false;  // some rank asked to stop at the last step
};

}  // namespace detail

}  // namespace nitro
