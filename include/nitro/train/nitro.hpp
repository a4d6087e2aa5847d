// nitro/train/nitro.hpp — the handle: an experiment bound to its model, data and optimizer.
//
//   FashionMLP<256> e;
//   nitro::Nitro h(e, nitro::max_epochs = 5);   // a fixed point: build a new one to change it
//   h.train();
//   auto test = h.evaluate("test");            // test.at("acc")
//   auto out = h.predict(batch_without_labels);
//
// The handle copies the experiment and binds its Device fields to its block of device scalars,
// builds the model (build_model), allocates the parameters in one flat buffer laid out by
// parameter group (param_group), initialises them from the seed, resolves the data (the `data`
// keyword, else build_data(), else a field `data`), builds the optimizer program (optim/program.hpp:
// rules, decay, anchors, clipping, SAM, schedules made for the horizon), and runs steps:
// forward -> loss -> backward (accumulated over `accum` micro-batches) -> update, metrics on the
// side. Every intermediate lives in the step's arena; after the first step a step allocates nothing.
//
// A step is an optimizer step. With accum = k the loader still yields batches of batch_size (the
// micro-batches); k of them make one step whose gradient is their mean, the same as one batch k
// times larger. An epoch of n batches makes n / k steps; its last n % k batches are not used.
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/io/dataset.hpp"
#include "nitro/io/loader.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/optim/program.hpp"
#include "nitro/optim/schedule_map.hpp"
#include "nitro/tensor/arena.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/train/metrics.hpp"
#include "nitro/train/show.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>

#include <chrono>       // throughput
#include <cmath>        // isfinite
#include <cstdint>      // int64_t
#include <cstdio>       // console lines
#include <cstring>      // memset: SAM's first-pass gradient
#include <memory>       // device-scalar block
#include <optional>     // loader batches, the optimizer program
#include <string>       // names
#include <string_view>  // split names
#include <tuple>        // get on forward's pair
#include <type_traits>  // traits
#include <utility>      // move

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
  using schedules_type = decltype(detail::resolve_schedule_map(std::declval<E const&>(), std::declval<Kw const&>()...));
  using optimizer_type = optim::program<E, param_spec, schedules_type>;
  static_assert(binding_type::loss_fits && binding_type::metrics_fits);

  explicit Nitro(E e, Kw... kw)
      : m_e(std::move(e)),
        m_seed(resolve_seed(m_e, kw...)),
        m_max_epochs(resolve_max_epochs(m_e, kw...)),
        m_batch_size(resolve_batch_size(m_e, kw...)),
        m_check_divergence(resolve_check_divergence(m_e, kw...)),
        m_accum(resolve_accum(m_e, kw...)),
        m_clip(resolve_gradient_clip_norm(m_e, kw...)),
        m_model(m_e.build_model()),
        m_params(true),
        m_state(false),
        m_data(detail::resolve_data(m_e, kw...)),
        m_tape(m_arena) {
    bind_device_fields();
    rng g(fold(m_seed.value, 1));
    ps_type ps = m_params.view();
    st_type st = m_state.view();
    m_model.init(ps, st, g);
    const optim::program_options o{m_clip.value, m_accum.value, horizon_of(m_data, m_batch_size.value, m_accum.value, m_max_epochs.value)};
    auto sched = detail::resolve_schedule_map(m_e, kw...);
    m_schedules_source = resolve_schedules(m_e, kw...).source;
    auto w0 = resolve_w0(kw...);
    using W0 = std::remove_cvref_t<decltype(w0.value)>;
    if constexpr (std::is_same_v<W0, not_given>) m_opt.emplace(m_e, m_params, sched, o);
    else if constexpr (is_tree_v<W0>) m_opt.emplace(m_e, m_params, sched, o, w0.value);
    else (void)w0_must_be_a_tree_of_tensors<W0>::ok;
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
  cpu_backend const& backend() const noexcept { return m_backend; }
  std::int64_t step() const noexcept { return m_opt->steps(); }  // optimizer steps (restored with the optimizer's state)
  int epoch() const noexcept { return m_epoch; }
  resolved<std::uint64_t> const& seed() const noexcept { return m_seed; }
  resolved<int> const& max_epochs() const noexcept { return m_max_epochs; }
  resolved<std::int64_t> const& batch_size() const noexcept { return m_batch_size; }
  resolved<int> const& accum() const noexcept { return m_accum; }
  resolved<double> const& gradient_clip_norm() const noexcept { return m_clip; }
  double learning_rate() const noexcept { return m_opt->base_rate(); }  // the base: learning_rate(), else lr, else 1e-3
  // The optimizer program: groups, rules, schedules, its state for checkpoints, describe() for show.
  optimizer_type& optimizer() noexcept { return *m_opt; }
  optimizer_type const& optimizer() const noexcept { return *m_opt; }
  std::int64_t micro_steps() const noexcept { return m_opt->steps() * m_accum.value + m_micro; }  // batches trained on

  // The optimizer's part of show() (train/show.hpp): the clip threshold, the schedule keys with
  // their source and binding, one row per parameter group, the rules and where each scheduled
  // value lands. describe_handle(h, kw) fills the rest.
  void describe_optimizer(handle_description& d) const {
    optimizer_type const& o = *m_opt;
    d.gradient_clip_norm = o.gradient_clip_norm();
    for (auto const& s : o.schedule_infos()) d.schedules.push_back({s.key, to_string(m_schedules_source), s.binds_to, s.curve});
    for (auto const& g : o.group_infos()) d.groups.push_back({g.name, g.params, g.rate, g.ratio, g.anchor, g.lambda, g.rule});
    d.optimizer = o.rule_summary();
    for (auto const& l : o.landings()) d.landings.push_back({l.key, l.field});
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
  // Trains from the current epoch to max_epochs, evaluating the valid split (when the data has
  // one) after each epoch. Prints one line per epoch when `verbose`.
  std::vector<epoch_summary> train(bool verbose = true) {
    auto const& split = m_data.split("train");
    data::loader<batch_type> ld(split, {m_batch_size.value, true, true, 2, fold(m_seed.value, 2)});
    if (ld.batches_per_epoch() == 0)
      throw error("E-DATA-008",
                  "the train split has " + std::to_string(split.size()) + " samples, fewer than one batch of " +
                      std::to_string(m_batch_size.value),
                  "use a smaller batch_size or more data");
    const std::int64_t k = m_accum.value;
    if (ld.batches_per_epoch() < k)
      throw error("E-OPT-016",
                  "an epoch has " + std::to_string(ld.batches_per_epoch()) + " batches of " + std::to_string(m_batch_size.value) +
                      ", fewer than the accum = " + std::to_string(k) + " micro-batches one optimizer step needs",
                  "use a smaller accum or batch_size, or more data");
    const std::int64_t used = ld.batches_per_epoch() / k * k;  // the last batches % accum are not used
    std::vector<epoch_summary> history;
    for (; m_epoch < m_max_epochs.value; ++m_epoch) {
      ld.start_epoch(static_cast<std::uint64_t>(m_epoch));
      auto t0 = std::chrono::steady_clock::now();
      double loss_sum = 0;
      std::int64_t batches = 0, samples = 0;
      while (batches < used) {
        auto b = ld.next();
        if (!b) break;
        loss_sum += train_step(*b);
        ++batches;
        samples += detail::batch_samples(*b);
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      epoch_summary s{m_epoch + 1, batches ? loss_sum / double(batches) : 0.0, secs > 0 ? double(samples) / secs : 0.0, {}};
      if (m_data.has("valid")) s.valid = evaluate("valid");
      if (verbose) {
        std::printf("epoch %d/%d  train loss %.4f", s.epoch, m_max_epochs.value, s.train_loss);
        for (auto const& [k, v] : s.valid.scalars) std::printf("  valid %s %.4f", k.c_str(), v);
        std::printf("  %.0f samples/s\n", s.samples_per_second);
        std::fflush(stdout);
      }
      history.push_back(std::move(s));
    }
    return history;
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
    step_context ctx{&m_arena, &m_tape, true, fold(fold(m_seed.value, 3), static_cast<std::uint64_t>(micro_steps())), 0};
    context_scope scope(ctx);
    struct cleanup {  // the tape and the arena are empty after the micro-batch, also when a hook throws
      tape& t;
      arena& a;
      ~cleanup() { t.clear(); a.reset(); }
    } done{m_tape, m_arena};
    batch_type batch = transfer(host_batch, false);
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
    if (++m_micro == m_accum.value) {
      m_opt->update(1.0f / static_cast<float>(m_accum.value));
      m_micro = 0;
    }
    return value;
  }

  // ---- evaluation -----------------------------------------------------------------------------
  // The split's metrics: what the metrics hook returns, reduced, plus "loss" (mean over batches)
  // when the loss hook can run on it.
  metric_values evaluate(std::string_view split_name) {
    auto const& split = m_data.split(split_name);
    data::loader<batch_type> ld(split, {m_batch_size.value, false, false, 2, 0});
    ld.start_epoch(0);
    metric_accumulator acc;
    while (auto b = ld.next()) eval_step(*b, acc);
    return acc.result();
  }

  // Forward alone on a batch that may lack labels; the outputs own their memory.
  template <class Batch>
  outputs_type predict(Batch const& host_batch) {
    step_context ctx{&m_arena, nullptr, false, 0, 0};
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
      if (keep_state && m_check_divergence.value && !std::isfinite(value))
        throw error("E-TRAIN-001", "the loss is " + std::to_string(value) + " at step " + std::to_string(step() + 1),
                    "lower the learning rate, clip gradients (gradient_clip_norm), or check the data for NaN");
      if (loss.requires_grad()) m_tape.backward<float>(loss.var(), 1.0f);
      if (keep_state) m_state.assign(std::get<1>(fwd));
      m_tape.clear();
      return value;
    }
  }

  // Optimizer steps in max_epochs epochs: the horizon the schedules are made for.
  static std::int64_t horizon_of(data_type const& d, std::int64_t batch, int accum, int epochs) {
    if (!d.has("train") || batch <= 0 || accum <= 0 || epochs <= 0) return 0;
    return static_cast<std::int64_t>(epochs) * (d.split("train").size() / batch / accum);
  }

  void eval_step(batch_type const& host_batch, metric_accumulator& acc) {
    step_context ctx{&m_arena, nullptr, false, 0, 0};
    context_scope scope(ctx);
    batch_type batch = transfer(host_batch, false);
    ps_type ps = m_params.view();
    st_type st = m_state.view();
    auto&& fwd = call_hook<hook::forward>(m_e, batch, m_model, ps, st);
    auto const& outputs = std::get<0>(fwd);
    if constexpr (binding_type::has_loss) {
      auto loss = call_hook<hook::loss>(m_e, batch, outputs);
      acc.add_mean("loss", mean_of(static_cast<double>(loss.item()), 1.0));
    }
    if constexpr (binding_type::has_metrics) acc.add(call_hook<hook::metrics>(m_e, batch, outputs));
    m_arena.reset();
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

  E m_e;
  resolved<std::uint64_t> m_seed;
  resolved<int> m_max_epochs;
  resolved<std::int64_t> m_batch_size;
  resolved<bool> m_check_divergence;
  resolved<int> m_accum;
  resolved<double> m_clip;
  model_type m_model;
  param_store_type m_params;
  param_store<state_spec> m_state;
  data_type m_data;
  std::optional<optimizer_type> m_opt;
  keyword_source m_schedules_source = keyword_source::fallback;
  std::unique_ptr<double[]> m_device_block;
  cpu_backend m_backend;
  arena m_arena;
  tape m_tape;
  int m_micro = 0;  // micro-batches into the current optimizer step
  int m_epoch = 0;
};

template <class E, class... Kw>
Nitro(E, Kw...) -> Nitro<E, Kw...>;

}  // namespace nitro
