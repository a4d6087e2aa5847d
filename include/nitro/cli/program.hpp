// nitro/cli/program.hpp — what the commands do with one compiled program (one instantiation E).
//
//   nitro::cli::program<FashionMLP<128>>::handle(cat, sel, extras)   the handle, built after the selection
//   ...::explain_text / ir_text / check / run / eval                  the commands' work for this program
//
// The selection is applied to a default-constructed experiment before the handle is built, so
// build_data() and build_model() see the selected values. Run keywords that are knobs but not
// fields reach the handle as keywords (nitro::seed = 3); the overrides --steps, --eval-every and
// --diagnostics as the run keywords max_steps, eval_every and diagnostics. Every command's handle
// has the same type: the keywords the command line may give are always passed, as std::optional
// (empty: not given) — one instantiation of the handle per program, whatever the command. The
// backend is the second template argument: the CPU's (the default, passed as no keyword), or
// nitro::cuda_device where --set device=cuda asks for it (cli/main.hpp instantiates that one only
// in a trainer nvcc compiles with the CUDA backend).
// `run` is the handle's own train(): its loggers write metrics.jsonl, metrics.csv and TensorBoard
// events into the run's record (knobs/records.hpp), a status logger keeps status.json, and its
// checkpointer writes checkpoints/ with their index; `eval` and `bundle` read those checkpoints.
// Under mpirun (context::replicas, the job nitro::main opened), `run` is one replica: every rank takes rank 0's
// run id, and only rank 0 creates the record, writes it and reports; the others train in silence.
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/cli/args.hpp"
#include "nitro/cli/context.hpp"
#include "nitro/cli/model_text.hpp"
#include "nitro/cli/status_logger.hpp"
#include "nitro/cli/table.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/run_lock.hpp"
#include "nitro/data/dataset.hpp"
#include "nitro/data/loader.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/keyword_knobs.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/slug.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/train/generate.hpp"
#include "nitro/train/nitro.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>

#include <algorithm>    // min, max
#include <chrono>       // samples per second
#include <cmath>        // sqrt
#include <csignal>      // a stop asked with Ctrl-C ends the run as `stopped`
#include <cstdint>      // int64_t
#include <filesystem>   // checkpoints/
#include <map>          // metrics
#include <memory>       // unique_ptr
#include <optional>     // best
#include <ostream>      // output
#include <sstream>      // texts
#include <string>       // names
#include <tuple>        // keyword arguments
#include <type_traits>  // traits
#include <vector>       // rows

namespace nitro::cli {

template <class E, class Device = cpu_backend>
struct program {
  using experiment_type = E;
  static constexpr bool on_cuda = std::is_same_v<Device, cuda_device>;
  using selection_tuple = decltype(selection_keywords<E>(std::declval<selection const&>()));
  // The keywords the command line itself gives (after the selection's): always the same types.
  static auto extra_keywords(selection const& s, handle_extras x) {
    auto common = std::tuple{kw::run_ref = std::move(x.run_ref), kw::weights = std::move(x.weights), kw::resume = std::move(x.resume),
                             kw::max_steps = s.request.steps, kw::eval_every = s.request.eval_every,
                             kw::diagnostics = s.request.diagnostics ? std::optional<bool>(true) : std::optional<bool>{},
                             kw::logger = std::move(x.loggers),
                             kw::replicas = x.replicas ? std::optional<dist::replicas*>(x.replicas) : std::nullopt};
    auto with_checkpointer = [&] {
      if constexpr (experiment_gives_checkpointer()) return std::move(common);
      else return std::tuple_cat(std::move(common), std::tuple{kw::checkpointer = std::move(x.checkpointer)});
    }();
    if constexpr (on_cuda) return std::tuple_cat(std::move(with_checkpointer), std::tuple{kw::device = cuda_device{s.request.cuda_index()}});
    else return with_checkpointer;
  }
  // Does the experiment say how it checkpoints (an accessor or a field)? Then the command line does not.
  static constexpr bool experiment_gives_checkpointer() {
    return !std::is_same_v<std::remove_cvref_t<decltype(resolve_checkpointer(std::declval<E const&>()).value)>, framework_default>;
  }
  using extra_tuple = decltype(extra_keywords(std::declval<selection const&>(), std::declval<handle_extras>()));
  template <class T> struct handle_of;
  template <class... K> struct handle_of<std::tuple<K...>> { using type = Nitro<E, K...>; };
  using handle_type = typename handle_of<decltype(std::tuple_cat(std::declval<selection_tuple>(), std::declval<extra_tuple>()))>::type;

  // A default experiment holding the selected values.
  static E experiment(catalog const& c, selection const& s) {
    E e{};
    apply_selection(e, c, s);
    return e;
  }

  // The handle for the selection: the data and model are built here, after the selection.
  static std::unique_ptr<handle_type> handle(catalog const& c, selection const& s, handle_extras x = {}) {
    return std::apply([&](auto... kw) { return std::make_unique<handle_type>(experiment(c, s), std::move(kw)...); },
                      std::tuple_cat(selection_keywords<E>(s), extra_keywords(s, std::move(x))));
  }

  // ---- run keywords ---------------------------------------------------------------------------
  // Every run keyword and construction fact as the handle resolves it (run_keywords::records()),
  // with the overrides of the command line (source `override`) and, for knobs, the knob's source.
  struct keyword_row {
    std::string name;
    std::string value;
    std::string source;
    std::string doc;
    std::string note;
  };
  // The records as the command line shows them: overrides marked, knobs named with their source.
  static std::vector<keyword_row> keyword_rows(std::vector<keyword_record> const& records, catalog const& c, selection const& s) {
    std::vector<keyword_row> rows;
    for (auto const& r : records) {
      keyword_row row{r.name, r.value, to_string(r.source), std::string(run_keyword_doc(r.name)), r.note};
      if (r.name == "max_steps" && s.request.steps) row = {r.name, std::to_string(*s.request.steps), "override", row.doc, "--steps"};
      if (r.name == "eval_every" && s.request.eval_every) row = {r.name, std::to_string(*s.request.eval_every), "override", row.doc, "--eval-every"};
      if (r.name == "diagnostics" && s.request.diagnostics) row = {r.name, "true", "override", row.doc, "--diagnostics"};
      if (r.name == "device" && s.request.device) row = {r.name, r.value, "override", row.doc, "--set device=" + *s.request.device};
      const std::size_t i = c.knob_index(r.name);
      if (i < c.knobs.size())
        row.note += (row.note.empty() ? "" : "; ") + std::string("the knob ") + r.name + " (" + to_string(s.knobs[i].source) + ")";
      rows.push_back(std::move(row));
    }
    return rows;
  }
  // The rows of a handle given the selection's keywords and these extras, resolved as the handle
  // resolves them (the same keyword types as handle_type: no data is built, nothing new is compiled).
  static std::vector<keyword_row> keyword_rows(E const& e, catalog const& c, selection const& s, handle_extras x) {
    auto records = std::apply([&](auto const&... kw) { return run_keywords<E, std::remove_cvref_t<decltype(kw)>...>(e, kw...).records(); },
                              std::tuple_cat(selection_keywords<E>(s), extra_keywords(s, std::move(x))));
    return keyword_rows(records, c, s);
  }
  // What `run` gives the handle besides its record (run_ref, the status logger, --resume,
  // --weights): the experiment's loggers, and the command line's checkpoints when the experiment
  // names none. `explain` shows the run keywords as a run would resolve them.
  static handle_extras run_extras(E const& e, selection const& s) {
    handle_extras x;
    x.loggers = to_logger_set(resolve_logger(e).value);
    x.checkpointer = run_checkpoints(s);
    return x;
  }
  static std::vector<keyword_row> keyword_rows(E const& e, catalog const& c, selection const& s) { return keyword_rows(e, c, s, run_extras(e, s)); }
  static ordered_json keywords_json(std::vector<keyword_row> const& rows) {
    ordered_json j = ordered_json::object();
    for (auto const& r : rows) j[r.name] = {{"value", record_value_json(r.value)}, {"source", r.source}};
    return j;
  }
  static std::string run_dir_of(std::vector<keyword_row> const& rows) {
    for (auto const& r : rows) if (r.name == "run_dir") return r.value;
    return "runs";
  }
  static std::string keyword_value(std::vector<keyword_row> const& rows, std::string_view name) {
    for (auto const& r : rows) if (r.name == name) return r.value;
    return {};
  }

  // ---- explain ----------------------------------------------------------------------------------
  static std::string explain_text(catalog const& c, selection const& s) { return explain_text(c, s, keyword_rows(experiment(c, s), c, s)); }
  // With the rows a handle reports (run: the binding report's table is the manifest's).
  static std::string explain_text(catalog const& c, selection const& s, std::vector<keyword_row> const& rows) {
    std::ostringstream o;
    o << "program " << c.programs[s.program];
    if (s.request.variant) o << "  (variant " << *s.request.variant << ")";
    o << "\nknobs:\n";
    table t;
    for (std::size_t i = 0; i < c.knobs.size(); ++i)
      t.row({c.knobs[i].name, s.knobs[i].value.str(), to_string(s.knobs[i].source), c.knobs[i].doc});
    o << t.str();
    o << "run keywords:\n";
    table k;
    for (auto const& r : rows) k.row({r.name, r.value, r.source, r.doc + (r.note.empty() ? "" : "; " + r.note)});
    o << k.str();
    if (s.request.steps || s.request.eval_every || s.request.diagnostics || s.request.device) {
      o << "overrides:\n";
      table v;
      if (s.request.steps) v.row({"steps", std::to_string(*s.request.steps), "override", "optimizer steps to train, instead of max_epochs epochs"});
      if (s.request.eval_every) v.row({"eval_every", std::to_string(*s.request.eval_every), "override", "steps between evaluations of valid"});
      if (s.request.diagnostics) v.row({"diagnostics", "true", "override", "gradient and parameter norms in every train line"});
      if (s.request.device) v.row({"device", *s.request.device, "override", "the backend the run's steps run on"});
      o << v.str();
    }
    return o.str();
  }

  // ---- ir ---------------------------------------------------------------------------------------
  static std::string ir_text(catalog const& c, selection const& s) {
    using H = handle_type;
    using Batch = typename H::batch_type;
    using B = typename H::binding_type;
    const E e = experiment(c, s);
    std::ostringstream o;
    o << "program " << c.programs[s.program] << "\n";

    o << "fields:\n";
    table f;
    std::size_t slot = 0;
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      std::string where;
      if constexpr (D::residency == residency::graph_const) where = "compiled in";
      else if constexpr (D::residency == residency::device) where = "device scalar slot " + std::to_string(slot++);
      else where = "host only";
      std::string type, value;
      if constexpr (requires { typename nitro::detail::knob_access<typename D::type>::type; } &&
                    is_knob_type_v<typename nitro::detail::knob_access<typename D::type>::type>) {
        type = nitro::detail::marker_name<typename D::type>();
        value = knob_value::of(nitro::detail::knob_access<typename D::type>::read(D::get(e))).str();
      } else {
        type = "host value";
        value = "-";
      }
      f.row({std::string(D::name.view()), std::string(to_string(D::residency)), type, value, where});
    });
    o << f.str();

    const auto model = e.build_model();
    o << "model: " << model.describe() << "\n";
    o << "layers:\n";
    table lt;
    std::vector<std::string> kernels;
    detail::describe_layers(lt, model, "", false, kernels, on_cuda);
    o << lt.str();
    o << (on_cuda ? "kernels (CUDA backend, " + *s.request.device + ", B = batch):\n" : std::string("kernels (CPU backend, B = batch):\n"));
    table kt;
    for (auto const& k : kernels) kt.row({k});
    if (kernels.empty()) kt.row({"none listed by these layers"});
    o << kt.str();

    using store = typename H::param_store_type;
    o << "parameters (one flat buffer, leaves 64-byte aligned):\n";
    table pt;
    for (auto const& li : store::leaves) {
      std::string dims;
      for (int d = 0; d < li.rank; ++d) dims += (d ? ", " : "") + std::to_string(li.dims[static_cast<std::size_t>(d)]);
      pt.row({std::string(li.keypath), "[" + dims + "]", std::to_string(li.numel), "offset " + std::to_string(li.offset)});
    }
    o << pt.str();
    o << "groups (one flat span each; the rule as at step 1):\n";
    {
      // the optimizer program alone (no data, no weights): its groups, spans, ratios, anchors and rules
      auto kws = selection_keywords<E>(s);
      const auto kw = std::apply([&](auto const&... k) { return run_keywords<E, std::remove_cvref_t<decltype(k)>...>(e, k...); }, kws);
      store weights(false);
      auto sched = std::apply([&](auto const&... k) { return nitro::detail::resolve_schedule_map(e, k...); }, kws);
      typename H::optimizer_type prog(e, weights, sched, {kw.gradient_clip_norm.value, kw.accum.value, 1});
      table gt;
      gt.row({"group", "leaves", "params", "floats", "ratio", "anchor", "decay", "rule"});
      std::size_t gi = 0;
      for (auto const& g : prog.group_infos()) {
        gt.row({g.name, std::to_string(g.leaves), std::to_string(g.params), std::to_string(store::groups[gi].size), metric_text(g.ratio), g.anchor,
                std::to_string(g.decayed_leaves) + "/" + std::to_string(g.leaves) + " leaves", g.rule});
        ++gi;
      }
      o << gt.str();
      o << "  one buffer of " << store::size << " floats (" << store::size * 4 << " bytes), leaves 64-byte aligned\n";
    }

    o << "batch fields:\n";
    table bt;
    boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
      using Key = std::remove_cvref_t<decltype(boost::hana::first(acc))>;
      using F = std::remove_cvref_t<decltype(boost::hana::second(acc)(std::declval<Batch const&>()))>;
      std::string hooks;
      if (declares_field<typename B::forward_input, Key>()) hooks += "forward";
      if (declares_field<typename B::loss_input, Key>()) hooks += std::string(hooks.empty() ? "" : ", ") + "loss";
      if (declares_field<typename B::metrics_input, Key>()) hooks += std::string(hooks.empty() ? "" : ", ") + "metrics";
      const bool moved = B::template transferred<Key>;
      bt.row({boost::hana::to<char const*>(boost::hana::first(acc)), std::is_same_v<typename F::scalar, float> ? "float tensor" : "index tensor",
              moved ? "transferred" : "host only", hooks.empty() ? "no hook declares it" : "declared by " + hooks});
    });
    o << bt.str();
    return o.str();
  }

  // ---- check ------------------------------------------------------------------------------------
  static auto experiment_data(E const& e) {
    if constexpr (hook::build_data::present<E>) return e.build_data();
    else return e.data;
  }

  static int check(context& ctx, catalog const& c, selection const& s) {
    E e = experiment(c, s);
    auto full = experiment_data(e);
    using D = decltype(full);
    using Batch = typename D::batch_type;
    const auto rows = keyword_rows(e, c, s);
    const std::int64_t bs = std::stoll(keyword_value(rows, "batch_size"));
    D one;
    one.name = full.name;
    one.fingerprint = full.fingerprint;
    std::vector<std::string> empty_splits;
    for (auto const& split : full.splits) {
      if (split.size() == 0) { empty_splits.push_back(split.name()); continue; }
      data::loader<Batch> ld(split, {std::min(bs, split.size()), false, false, 1, 0});
      ld.start_epoch(0);
      auto b = ld.next();
      Batch copy = *b;
      boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
        auto& field = boost::hana::second(acc)(copy);
        field = field.clone();
      });
      one.splits.emplace_back(split.name(), std::move(copy));
    }
    // on the backend the selection asks for (--set device=cuda: the batches run on the GPU)
    auto kws = [&] {
      if constexpr (on_cuda) return std::tuple_cat(selection_keywords<E>(s), std::tuple{kw::data = one, kw::device = cuda_device{s.request.cuda_index()}});
      else return std::tuple_cat(selection_keywords<E>(s), std::tuple{kw::data = one});
    }();
    auto h = std::apply([&](auto... kw) { return std::make_unique<Nitro<E, decltype(kw)...>>(std::move(e), kw...); }, kws);
    using H = std::remove_cvref_t<decltype(*h)>;
    using B = typename H::binding_type;

    ctx.out << "check " << c.programs[s.program] << ": the hooks bind\n";
    std::string fwd, loss, met, host;
    boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
      using Key = std::remove_cvref_t<decltype(boost::hana::first(acc))>;
      std::string n = boost::hana::to<char const*>(boost::hana::first(acc));
      if (declares_field<typename B::forward_input, Key>()) fwd += (fwd.empty() ? "" : ", ") + n;
      if (declares_field<typename B::loss_input, Key>()) loss += (loss.empty() ? "" : ", ") + n;
      if (declares_field<typename B::metrics_input, Key>()) met += (met.empty() ? "" : ", ") + n;
      if (!B::template transferred<Key>) host += (host.empty() ? "" : ", ") + n;
    });
    table t;
    t.row({"hooks", "forward(" + fwd + ")" + (B::has_loss ? "  loss(" + loss + ")" : "") + (B::has_metrics ? "  metrics(" + met + ")" : "")});
    t.row({"host only", host.empty() ? "none" : host});
    std::string sizes;
    for (auto const& split : full.splits) sizes += (sizes.empty() ? "" : ", ") + split.name() + " " + std::to_string(split.size());
    t.row({"data", full.name + ": " + sizes + " samples"});
    t.row({"model", h->model().describe() + ", " + std::to_string(H::param_store_type::count) + " parameters"});
    if constexpr (on_cuda) t.row({"backend", std::string(h->backend().name()) + " (" + *s.request.device + ")"});
    for (auto const& split : one.splits) {
      auto m = h->evaluate(split.name());
      std::string line = "one batch of " + std::to_string(split.size());
      auto out = h->predict(split.all());
      if constexpr (nitro::detail::is_tensor<typename H::outputs_type>::value) line += ": outputs " + out.shape().to_string();
      for (auto const& [k, v] : m.scalars) line += "  " + k + " " + metric_text(v);
      t.row({split.name(), line});
    }
    for (auto const& n : empty_splits) t.row({n, "empty: no batch to run"});
    ctx.out << t.str();
    ctx.out << "nothing was written\n";
    return exit_ok;
  }

  // ---- eval -------------------------------------------------------------------------------------
  // `weights` names one file, or the mean of several checkpoints of `run`; the steps they hold are shown.
  static int eval(context& ctx, catalog const& c, selection const& s, weights_ref const& weights, std::string const& run, std::string const& split) {
    check_backend_kernels();
    const resolved_weights w = resolve(weights, {.runs_dir = std::filesystem::path(run).parent_path()});
    handle_extras x;
    x.weights = weights;
    x.loggers = to_logger_set(no_loggers);
    x.replicas = ctx.replicas;  // under mpirun every rank evaluates its block of the split
    auto h = handle(c, s, std::move(x));
    auto m = h->evaluate(split);
    const auto step_of = [](resolved_checkpoint const& r) -> std::string {
      if (!r.entry.file.empty()) return std::to_string(r.entry.step);
      auto f = safetensors_file::read(r.file);
      return f.meta("step") ? *f.meta("step") : std::string("?");
    };
    if (!w.average) {
      ctx.out << "eval " << c.programs[s.program] << "  weights " << w.checkpoints.at(0).file.string() << " (step " << step_of(w.checkpoints.at(0)) << ")\n";
    } else {
      std::string steps;
      for (auto const& r : w.checkpoints) steps += (steps.empty() ? "" : ", ") + step_of(r);
      ctx.out << "eval " << c.programs[s.program] << "  weights " << weights.pick().to_string() << " of " << run << " (the mean of steps " << steps << ")\n";
    }
    table t;
    for (auto const& [k, v] : m.scalars) t.row({split, k, metric_text(v)});
    ctx.out << t.str();
    return exit_ok;
  }

  // ---- sample: text from a language model's weights (train/generate.hpp) -------------------------------
  static int sample(context& ctx, catalog const& c, selection const& s, weights_ref const& weights, generate_options o,
                    std::string const& prompt) {
    using forward_input = typename handle_type::binding_type::forward_input::input;
    if constexpr (!std::is_same_v<forward_input, data::tokens_in>) {
      throw error("E-GEN-002",
                  "`sample` draws text from a language model, and " + std::string(c.programs[s.program]) +
                      "'s forward hook does not take nitro::data::tokens_in (byte tokens [seq, batch])",
                  "sample from an experiment whose forward takes nitro::data::tokens_in and returns logits [256, seq, batch]");
    } else {
      handle_extras x;
      x.weights = weights;
      x.loggers = to_logger_set(no_loggers);
      auto h = handle(c, s, std::move(x));
      o.seed = s.seed(c);
      ctx.out << prompt;
      o.on_token = [&](char ch) { ctx.out << ch << std::flush; };
      (void)generate_text(*h, prompt, o);
      ctx.out << "\n";
      return exit_ok;
    }
  }

  // ---- run --------------------------------------------------------------------------------------
  static std::string binding_report(catalog const& c, selection const& s, std::vector<keyword_row> const& rows) {
    return explain_text(c, s, rows) + "\n" + ir_text(c, s);
  }

  // The checkpoints the command line keeps when the experiment says nothing: every epoch (or every
  // --eval-every steps) and the run's end; the latest ten (so --weights "Average(Last(10))" works)
  // and the best by the run's monitor (a run without a valid split records no metrics in its
  // checkpoints, so none of them is best).
  static checkpoint_policy run_checkpoints(selection const& s) {
    checkpoint_policy p;
    p.every = s.request.eval_every ? every_steps(*s.request.eval_every) : every_epochs(1);
    p.keep_last = 10;
    p.keep_best = 1;
    return p;
  }

  // The run's folder, made exclusively. Two processes of one selection started in the same second
  // may draw the same id: the later one draws again (an id given with --id, or a data-parallel
  // job's broadcast one, is kept, and a folder it names that exists is E-REC-001).
  static run_record create_record(catalog const& c, selection const& s, run_options const& o, bool data_parallel, std::string const& run_dir,
                                  run_identity& ident) {
    for (int attempt = 0;; ++attempt) {
      try {
        return run_record::create(run_dir, ident.slug);
      } catch (error const&) {
        if (o.id || data_parallel || attempt == 7 || !std::filesystem::exists(std::filesystem::path(run_dir) / ident.slug)) throw;
        ident.id = make_run_id();
        ident.slug = make_slug(c.experiment, s.request, ident.id);
      }
    }
  }

  // The state status.json holds now (after a write that failed, the last one that did not).
  static std::string status_on_disk(run_record const& rec) {
    try {
      return read_json(rec.path("status.json")).value("state", std::string("?"));
    } catch (std::exception const&) {
      return "nothing readable";
    }
  }

  // The backend's choice of kernels for this CPU (the CPU backend reads NITRO_CPU_ISA): a setting
  // it cannot honour is its coded error (E-CPU-002) before a run or an evaluation starts.
  static void check_backend_kernels() {
    using backend = typename handle_type::backend_type;
    if constexpr (requires { backend::kernels(); }) (void)backend::kernels();
  }

  static run_result run(context& ctx, catalog const& c, selection const& s, run_options const& o) {
    const E e = experiment(c, s);
    handle_extras x = run_extras(e, s);
    run_result res;

    dist::replicas* dp = ctx.replicas;
    if (dp && dp->size() == 1) dp = nullptr;
    const bool lead = !dp || dp->writes();  // only rank 0 writes the record and reports

    run_identity ident;
    ident.id = o.id ? *o.id : make_run_id();
    if (dp) {
      dist::broadcast_string(*dp, ident.id, "the broadcast of the run's id");  // one record: rank 0's
      dp->barrier("the start of the run");  // every rank has read the run it resumes before rank 0 makes the new one
    }
    ident.slug = make_slug(c.experiment, s.request, ident.id);
    ident.program = c.programs[s.program];
    ident.started = iso_time_now();
    ident.command = ctx.command_line;

    const std::string run_dir = o.run_dir ? *o.run_dir : run_dir_of(keyword_rows(e, c, s, x));
    check_backend_kernels();  // before the run's folder is made
    run_record rec = lead ? create_record(c, s, o, dp != nullptr, run_dir, ident) : run_record((std::filesystem::path(run_dir) / ident.slug).string());
    run_lock lock = lead ? run_lock(rec.dir()) : run_lock();  // the handle shares it; a resume of this run waits for its end
    res.dir = rec.dir();
    res.slug = ident.slug;

    // status.json: kept by a logger the run's loggers include
    status_record st;
    st.slug = ident.slug;
    st.selection = selection_json(c, s);
    st.started = ident.started;
    {
      const monitor_spec m = resolve_monitor(e).value;
      st.best_metric = m.split() + "/" + m.name();
      st.best_minimize = !m.maximize();
    }
    auto status = std::make_shared<status_logger>(rec, st);

    x.run_ref = run_reference{rec.dir(), metrics_metadata_json(c, s, ident).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
    x.loggers.add(std::shared_ptr<run_logger>(status));
    x.resume = o.resume;
    x.weights = o.weights;
    x.replicas = dp;
    // the manifest's run keywords are those the handle is given, as it resolves them: the handle's
    // own records once it exists (a failed construction records the same keywords, resolved alike)
    ident.run_keywords = keywords_json(keyword_rows(e, c, s, x));
    std::unique_ptr<handle_type> h;
    try {
      h = handle(c, s, std::move(x));
    } catch (std::exception const& err) {
      if (lead) {
        rec.write_manifest(manifest_json(c, s, ident));
        status->fail(err.what());
      }
      throw;
    }
    ident.data["name"] = h->data().name;
    ident.data["fingerprint"] = h->data().fingerprint;
    ordered_json splits = ordered_json::object();
    for (auto const& sp : h->data().splits) splits[sp.name()] = sp.size();
    ident.data["splits"] = splits;
    if (!h->data().classes.empty()) ident.data["classes"] = h->data().classes;  // the report's heatmap labels
    ident.backend = {{"device", to_string(h->backend().device)}, {"name", h->backend().name()}};
    if constexpr (requires { h->backend().kernels(); }) ident.backend["kernels"] = h->backend().kernels();
    const auto rows = keyword_rows(h->keywords().records(), c, s);
    ident.run_keywords = keywords_json(rows);
    if (lead) {
      try {
        rec.write_manifest(manifest_json(c, s, ident));
        rec.write_text("binding_report.txt", show_text(h->description()) + "\n" + binding_report(c, s, rows));
      } catch (std::exception const& err) {
        try {
          status->fail(err.what());  // the status file says why, where the disk still lets it
        } catch (std::exception const&) {
        }
        throw;
      }
    }

    if (lead)  // a damaged latest checkpoint costs a checkpoint interval: say so even with --quiet
      for (auto const& skipped : h->resume_skipped())
        ctx.err << "W-CKPT-002: passed over a damaged checkpoint, " << skipped << "; resuming at step " << h->step() << "\n";
    const std::int64_t per_epoch = h->data().split("train").size() / h->batch_size().value / h->accum().value;
    const std::int64_t horizon = h->horizon();
    const std::int64_t epochs = per_epoch > 0 ? (horizon + per_epoch - 1) / per_epoch : 0;
    if (!o.quiet && lead) {
      ctx.out << "run " << ident.slug << "\n  program " << ident.program << "  seed " << h->seed().value << "  " << horizon << " steps (" << epochs
              << (epochs == 1 ? " epoch" : " epochs") << " of " << per_epoch << " steps)\n  record  " << rec.dir() << "\n";
      if (o.resume) ctx.out << "  resume  " << o.resume->to_string() << " at step " << h->step() << "\n";
      if (o.weights) ctx.out << "  weights " << o.weights->to_string() << "\n";
      ctx.out.flush();
    }

    train_options topt;
    topt.console = !o.quiet && lead;
    topt.stop = &detail::stop_requested;
    if (h->data().has("test")) topt.evaluate_after = {"test"};
    if (!lead) {  // a replica: rank 0 keeps the record and reports the run
      try {
        detail::stop_signals signals;
        h->train(topt);
        res.state = to_string(h->status());
      } catch (std::exception const& err) {
        res.state = "failed";
        ctx.err << "rank " << dp->rank() << ": " << err.what() << "\n";
      }
      res.exit_code = res.state == "finished" ? exit_ok : exit_failed;
      return res;
    }
    // A record that cannot be written (a full disk, an I/O error) fails the run with exit 3, even
    // when it is the last write of a run that trained to its end: the record is not whole.
    std::string record_failure;
    try {
      detail::stop_signals signals;
      h->train(topt);
    } catch (std::exception const& err) {
      auto const* e = dynamic_cast<error const*>(&err);
      if (e && is_record_error(e->code())) record_failure = err.what();
      if (status->record().state != "failed") {
        try {
          status->fail(err.what());
        } catch (std::exception const& st) {
          record_failure = std::string(err.what()) + "\nstatus.json still says '" + status_on_disk(rec) + "': " + st.what();
        }
      }
    }
    if (!status->ended()) status->fail("the run ended without its trainer saying how");
    status_record const& end = status->record();

    res.state = end.state;
    res.metrics = end.last;
    res.exit_code = !record_failure.empty() ? exit_records : end.state == "finished" ? exit_ok : exit_failed;
    if (!record_failure.empty()) {
      ctx.out << end.state << ": " << rec.dir() << "\n";
      ctx.err << record_failure << "\n";
      return res;
    }
    if (!o.quiet || end.state != "finished") {
      std::string line = end.state + ": " + rec.dir();
      for (auto const& [k, v] : end.last)
        if (k.rfind("train/", 0) != 0) line += "  " + k + " " + metric_text(v);
      ctx.out << line << "\n";
      if (!end.error.empty()) ctx.err << end.error << "\n";
      else if (!end.reason.empty() && end.state != "finished") ctx.err << end.reason << "\n";
      // the splits evaluated when training ended, last: the run's result (`./nitro.sh train` ends on it)
      for (auto const& split : topt.evaluate_after) {
        std::string r;
        for (auto const& [k, v] : end.last)
          if (k.rfind(split + "/", 0) == 0) r += "  " + k.substr(split.size() + 1) + " " + metric_text(v);
        if (!r.empty()) ctx.out << split << r << "\n";
      }
    }
    return res;
  }
};

}  // namespace nitro::cli
