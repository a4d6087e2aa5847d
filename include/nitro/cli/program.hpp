// nitro/cli/program.hpp — what the commands do with one compiled program (one instantiation E).
//
//   nitro::cli::program<FashionMLP<128>>::handle(cat, sel)   the handle, built after the selection
//   ...::explain_text / ir_text / check / run / eval          the commands' work for this program
//
// The selection is applied to a default-constructed experiment before the handle is built, so
// build_data() and build_model() see the selected values. Run keywords that are knobs but not
// fields reach the handle as keywords (nitro::seed = 3). `run` drives the handle's train_step()
// and writes the run record (knobs/records.hpp); docs/cli-integration.md says how it moves onto the
// trainer's own loop and loggers.
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/cli/args.hpp"
#include "nitro/cli/detail/weights.hpp"
#include "nitro/cli/table.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/io/dataset.hpp"
#include "nitro/io/loader.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/keyword_knobs.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/slug.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/nn/layers/dense.hpp"
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

// What every command has at hand.
struct context {
  std::string program;       // the binary's name, for usage lines
  std::string self;          // the binary's path, to run points as processes
  std::string command_line;  // for the manifest
  std::ostream& out;
  std::ostream& err;
};

struct run_options {
  std::optional<std::string> run_dir;
  std::optional<std::string> id;
  bool quiet = false;
};

struct run_result {
  int exit_code = exit_ok;
  std::string dir, slug, state;
  std::map<std::string, double> metrics;  // "valid/acc", "test/loss", ...
};

namespace detail {

inline volatile std::sig_atomic_t stop_requested = 0;
extern "C" inline void on_stop_signal(int) { stop_requested = 1; }

// Ctrl-C (SIGINT) and SIGTERM end a run between steps as `stopped`, its record complete.
class stop_signals {
 public:
  stop_signals() {
    stop_requested = 0;
    m_int = std::signal(SIGINT, on_stop_signal);
    m_term = std::signal(SIGTERM, on_stop_signal);
  }
  ~stop_signals() {
    std::signal(SIGINT, m_int);
    std::signal(SIGTERM, m_term);
  }
  stop_signals(stop_signals const&) = delete;
  stop_signals& operator=(stop_signals const&) = delete;

 private:
  void (*m_int)(int);
  void (*m_term)(int);
};

template <class L> struct is_chain : std::false_type {};
template <class... L> struct is_chain<nn::chain_layer<L...>> : std::true_type {};
template <class L> struct is_dense : std::false_type {};
template <std::int64_t I, std::int64_t O, class A, bool B> struct is_dense<nn::dense_layer<I, O, A, B>> : std::true_type {};

template <class Spec>
std::string spec_shapes(std::string const& prefix) {
  std::string s;
  for_each_leaf_type<Spec>([&](auto kp, auto leaf) {
    using Lf = typename decltype(leaf)::type;
    std::string dims;
    for (auto d : Lf::dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    s += (s.empty() ? "" : ", ") + prefix + std::string(decltype(kp)::view()) + " [" + dims + "]";
  });
  return s;
}

// The kernels a layer runs on the CPU backend, as `ir` lists them. Dense layers are known here; any
// other layer may describe its own with `std::vector<std::string> kernels() const`.
template <class L>
std::vector<std::string> layer_kernels(L const& l, bool input_needs_grad) {
  if constexpr (requires { { l.kernels() } -> std::convertible_to<std::vector<std::string>>; }) {
    return l.kernels();
  } else if constexpr (is_dense<L>::value) {
    constexpr auto I = L::in_features, O = L::out_features;
    std::vector<std::string> k;
    const std::string act = L::activation::is_identity ? std::string() : std::string(" + ") + L::activation::name();
    const bool bias = leaf_count<typename L::param_spec>() == 2;
    k.push_back("forward   gemm<float> [" + std::to_string(O) + " x " + std::to_string(I) + "] . [" + std::to_string(I) + " x B]" +
                (bias ? " + bias" : "") + act + " (one pass)");
    if (!L::activation::is_identity) k.push_back(std::string("backward  ") + L::activation::name() + "' elementwise [" + std::to_string(O) + " x B]");
    if (bias) k.push_back("backward  bias gradient: row sums [" + std::to_string(O) + " x B] -> [" + std::to_string(O) + "]");
    k.push_back("backward  gemm<float> dW [" + std::to_string(O) + " x B] . [B x " + std::to_string(I) + "]");
    if (input_needs_grad) k.push_back("backward  gemm<float> dx [" + std::to_string(I) + " x " + std::to_string(O) + "] . [" + std::to_string(O) + " x B]");
    return k;
  } else {
    return {};
  }
}

inline std::string features_text(std::int64_t f) { return f == nn::dynamic ? std::string("dynamic") : std::to_string(f); }

template <class L>
void describe_layers(table& t, L const& l, std::string const& name, bool input_needs_grad, std::vector<std::string>& kernels) {
  if constexpr (is_chain<L>::value) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((describe_layers(t, l.template at<I>(), (name.empty() ? "" : name + ".") + std::string(layer_name<I + 1>().view()),
                        I > 0 || input_needs_grad, kernels)),
       ...);
    }(std::make_index_sequence<L::size()>{});
  } else {
    std::string params = spec_shapes<typename L::param_spec>(name.empty() ? "" : name + ".");
    t.row({name.empty() ? "model" : name, l.describe(), features_text(L::in_features) + " -> " + features_text(L::out_features),
           params.empty() ? "no parameters" : params});
    for (auto const& k : layer_kernels(l, input_needs_grad)) kernels.push_back((name.empty() ? "model" : name) + "  " + k);
  }
}

template <class T> std::string scalar_text(T const& v) {
  if constexpr (is_knob_scalar_v<T>) return knob_value::of(v).str();
  else return "-";
}

}  // namespace detail

template <class E>
struct program {
  using experiment_type = E;
  using keyword_tuple = decltype(selection_keywords<E>(std::declval<selection const&>()));
  template <class T> struct handle_of;
  template <class... K> struct handle_of<std::tuple<K...>> { using type = Nitro<E, K...>; };
  using handle_type = typename handle_of<keyword_tuple>::type;

  // A default experiment holding the selected values.
  static E experiment(catalog const& c, selection const& s) {
    E e{};
    apply_selection(e, c, s);
    return e;
  }

  // The handle for the selection: the data and model are built here, after the selection.
  static std::unique_ptr<handle_type> handle(catalog const& c, selection const& s) {
    return std::apply([&](auto... kw) { return std::make_unique<handle_type>(experiment(c, s), kw...); }, selection_keywords<E>(s));
  }

  // ---- run keywords ---------------------------------------------------------------------------
  struct keyword_row {
    std::string name;
    knob_value value;
    std::string source;
    std::string doc;
    std::string note;
  };
  static std::vector<keyword_row> keyword_rows(E const& e, catalog const& c, selection const& s) {
    std::vector<keyword_row> rows;
    for_each_keyword_knob([&](auto k, char const* name, char const* doc) {
      using K = decltype(k);
      const std::size_t i = c.knob_index(name);
      if (i < c.knobs.size() && !c.knobs[i].is_field) {
        rows.push_back({name, s.knobs[i].value, "keyword", doc, std::string("the knob ") + name + " (" + to_string(s.knobs[i].source) + ")"});
      } else {
        auto r = K::resolve(e);
        rows.push_back({name, knob_value::of(static_cast<typename K::type>(r.value)), to_string(r.source), doc,
                        i < c.knobs.size() ? std::string("the knob ") + name + " (" + to_string(s.knobs[i].source) + ")" : std::string()});
      }
    });
    return rows;
  }
  static ordered_json keywords_json(std::vector<keyword_row> const& rows) {
    ordered_json j = ordered_json::object();
    for (auto const& r : rows) j[r.name] = {{"value", r.value.json()}, {"source", r.source}};
    return j;
  }
  static std::string run_dir_of(std::vector<keyword_row> const& rows) {
    for (auto const& r : rows) if (r.name == "run_dir") return r.value.str();
    return "runs";
  }

  // ---- explain ----------------------------------------------------------------------------------
  static std::string explain_text(catalog const& c, selection const& s) {
    const E e = experiment(c, s);
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
    for (auto const& r : keyword_rows(e, c, s)) k.row({r.name, r.value.str(), r.source, r.doc + (r.note.empty() ? "" : "; " + r.note)});
    o << k.str();
    if (s.request.steps || s.request.eval_every || s.request.diagnostics) {
      o << "overrides:\n";
      table v;
      if (s.request.steps) v.row({"steps", std::to_string(*s.request.steps), "override", "optimizer steps to train, instead of max_epochs epochs"});
      if (s.request.eval_every) v.row({"eval_every", std::to_string(*s.request.eval_every), "override", "steps between evaluations of valid"});
      if (s.request.diagnostics) v.row({"diagnostics", "true", "override", "gradient and parameter norms in every train line"});
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
                    is_knob_scalar_v<typename nitro::detail::knob_access<typename D::type>::type>) {
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
    detail::describe_layers(lt, model, "", false, kernels);
    o << lt.str();
    o << "kernels (CPU backend, B = batch):\n";
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
    o << "groups:\n";
    table gt;
    gt.row({"default", std::to_string(store::leaves.size()) + " leaves", std::to_string(store::count) + " parameters",
            std::to_string(store::size) + " floats with padding", std::to_string(store::size * 4) + " bytes"});
    o << gt.str();

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
    std::int64_t bs = 128;
    for (auto const& r : rows) if (r.name == "batch_size") bs = r.value.template as<std::int64_t>();
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
    auto kws = std::tuple_cat(selection_keywords<E>(s), std::tuple{kw::data = one});
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
  static int eval(context& ctx, catalog const& c, selection const& s, std::string const& weights_path, std::string const& split) {
    auto h = handle(c, s);
    auto f = cli::detail::read_weights_file(weights_path);
    cli::detail::load_weights(f, "params.", h->params());
    cli::detail::load_weights(f, "state.", h->state());
    auto m = h->evaluate(split);
    table t;
    std::string step = f.metadata.count("step") ? f.metadata.at("step") : std::string("?");
    ctx.out << "eval " << c.programs[s.program] << "  weights " << weights_path << " (step " << step << ")\n";
    for (auto const& [k, v] : m.scalars) t.row({split, k, metric_text(v)});
    ctx.out << t.str();
    return exit_ok;
  }

  // ---- run --------------------------------------------------------------------------------------
  static std::string binding_report(catalog const& c, selection const& s) {
    return explain_text(c, s) + "\n" + ir_text(c, s);
  }

  static run_result run(context& ctx, catalog const& c, selection const& s, run_options const& o) {
    auto h = handle(c, s);
    E const& e = h->experiment();
    const auto rows = keyword_rows(e, c, s);
    run_result res;

    run_identity ident;
    ident.id = o.id ? *o.id : make_run_id();
    ident.slug = make_slug(c.experiment, s.request, ident.id);
    ident.program = c.programs[s.program];
    ident.started = iso_time_now();
    ident.command = ctx.command_line;
    ident.run_keywords = keywords_json(rows);
    ident.run_keywords["seed"] = {{"value", h->seed().value}, {"source", to_string(h->seed().source)}};
    ident.run_keywords["max_epochs"] = {{"value", h->max_epochs().value}, {"source", to_string(h->max_epochs().source)}};
    ident.run_keywords["batch_size"] = {{"value", h->batch_size().value}, {"source", to_string(h->batch_size().source)}};
    ident.data["name"] = h->data().name;
    ident.data["fingerprint"] = h->data().fingerprint;
    ordered_json splits = ordered_json::object();
    for (auto const& sp : h->data().splits) splits[sp.name()] = sp.size();
    ident.data["splits"] = splits;

    const std::string run_dir = o.run_dir ? *o.run_dir : run_dir_of(rows);
    run_record rec = run_record::create(run_dir, ident.slug);
    res.dir = rec.dir();
    res.slug = ident.slug;
    rec.write_manifest(manifest_json(c, s, ident));
    rec.append_metrics(metrics_metadata_json(c, s, ident), true);
    rec.write_text("binding_report.txt", binding_report(c, s));
    std::filesystem::create_directories(rec.path("checkpoints"));

    using H = handle_type;
    using Batch = typename H::batch_type;
    auto const& train = h->data().split("train");
    const std::int64_t bs = h->batch_size().value;
    data::loader<Batch> ld(train, {bs, true, true, 2, fold(h->seed().value, 2)});
    const std::int64_t bpe = ld.batches_per_epoch();
    if (bpe == 0)
      throw error("E-DATA-008", "the train split has " + std::to_string(train.size()) + " samples, fewer than one batch of " + std::to_string(bs),
                  "use a smaller batch_size or more data");
    const std::int64_t horizon = s.request.steps ? *s.request.steps : bpe * h->max_epochs().value;
    std::int64_t log_every = 50;
    for (auto const& r : rows) if (r.name == "log_every_n_steps") log_every = std::max<std::int64_t>(1, r.value.template as<std::int64_t>());
    const std::int64_t eval_every = s.request.eval_every.value_or(0);
    const bool has_valid = h->data().has("valid");

    status_record st;
    st.slug = ident.slug;
    st.selection = selection_json(c, s);
    st.horizon_steps = horizon;
    st.horizon_epochs = static_cast<int>((horizon + bpe - 1) / bpe);
    st.started = ident.started;
    st.best_metric = "valid/loss";
    rec.write_status(st.json());

    if (!o.quiet) {
      ctx.out << "run " << ident.slug << "\n  program " << ident.program << "  seed " << h->seed().value << "  " << horizon << " steps ("
              << st.horizon_epochs << (st.horizon_epochs == 1 ? " epoch" : " epochs") << " of " << bpe << " batches)\n  record  " << rec.dir()
              << "\n";
      ctx.out.flush();
    }

    std::int64_t step = 0;
    int epoch = 0;
    std::string state = "finished";
    std::int64_t last_eval_step = -1;
    auto write_checkpoint = [&](std::string const& name, std::map<std::string, double> const& metrics) {
      std::map<std::string, std::string> meta;
      meta["step"] = std::to_string(step);
      meta["epoch"] = std::to_string(epoch);
      meta["program"] = ident.program;
      meta["slug"] = ident.slug;
      meta["selection"] = s.request.json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      ordered_json mj = ordered_json::object();
      for (auto const& [k, v] : metrics) mj[k] = v;
      meta["metrics"] = mj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      cli::detail::write_weights(rec.path("checkpoints/" + name + ".safetensors"), h->params(), h->state(), meta);
    };
    ordered_json index = ordered_json::object();
    auto note_checkpoint = [&](std::string const& name, std::map<std::string, double> const& metrics) {
      ordered_json mj = ordered_json::object();
      for (auto const& [k, v] : metrics) mj[k] = v;
      index[name] = {{"file", name + ".safetensors"}, {"step", step}, {"epoch", epoch}, {"metrics", mj}};
      rec.write_text("checkpoints/index.json", index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    };
    auto evaluate = [&](std::string const& split, bool final_) {
      auto m = h->evaluate(split);
      ordered_json line;
      line["type"] = "eval";
      line["split"] = split;
      line["step"] = step;
      line["epoch"] = epoch;
      if (final_) line["final"] = true;
      std::map<std::string, double> flat;
      for (auto const& [k, v] : m.scalars) {
        line[k] = v;
        st.last[split + "/" + k] = v;
        flat[split + "/" + k] = v;
      }
      rec.append_metrics(line);
      if (split == "valid") {
        last_eval_step = step;
        if (m.has("loss") && (!st.best_value || m.scalars.at("loss") < *st.best_value)) {
          st.best_value = m.scalars.at("loss");
          st.best_step = step;
          write_checkpoint("best", flat);
          note_checkpoint("best", flat);
        }
      }
      return m;
    };

    try {
      detail::stop_signals signals;
      double log_loss = 0;
      std::int64_t log_n = 0;
      while (step < horizon && !detail::stop_requested) {
        ld.start_epoch(static_cast<std::uint64_t>(epoch));
        const auto t0 = std::chrono::steady_clock::now();
        double epoch_loss = 0;
        std::int64_t epoch_batches = 0, samples = 0;
        while (step < horizon && !detail::stop_requested) {
          auto b = ld.next();
          if (!b) break;
          const double loss = h->train_step(*b);
          ++step;
          ++epoch_batches;
          samples += nitro::detail::batch_samples(*b);
          epoch_loss += loss;
          log_loss += loss;
          ++log_n;
          if (step % log_every == 0 || step == horizon) {
            ordered_json line;
            line["type"] = "train";
            line["step"] = step;
            line["epoch"] = epoch + 1;
            line["loss"] = log_loss / double(log_n);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            line["samples_per_second"] = secs > 0 ? double(samples) / secs : 0.0;
            line["lr"] = h->learning_rate();
            if (s.request.diagnostics) {
              auto& store = h->param_buffer();
              double g = 0, p = 0;
              for (std::int64_t i = 0; i < H::param_store_type::size; ++i) {
                g += double(store.grads()[i]) * double(store.grads()[i]);
                p += double(store.values()[i]) * double(store.values()[i]);
              }
              line["grad_norm"] = std::sqrt(g);
              line["param_norm"] = std::sqrt(p);
            }
            rec.append_metrics(line);
            st.last["train/loss"] = log_loss / double(log_n);
            st.step = step;
            st.epoch = epoch;
            rec.write_status(st.json());
            log_loss = 0;
            log_n = 0;
          }
          if (eval_every > 0 && step % eval_every == 0 && has_valid) {
            evaluate("valid", false);
            st.step = step;
            rec.write_status(st.json());
          }
        }
        const bool full_epoch = epoch_batches == bpe;
        if (!full_epoch) break;
        ++epoch;
        st.epoch = epoch;
        st.step = step;
        std::string valid_text;
        if (has_valid && last_eval_step != step) {
          auto m = evaluate("valid", false);
          for (auto const& [k, v] : m.scalars) valid_text += "  valid " + k + " " + metric_text(v);
        }
        rec.write_status(st.json());
        if (!o.quiet) {
          const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          char buf[64];
          std::snprintf(buf, sizeof buf, "  %.0f samples/s", secs > 0 ? double(samples) / secs : 0.0);
          ctx.out << "epoch " << epoch << "/" << st.horizon_epochs << "  step " << step << "  train loss "
                  << metric_text(epoch_batches ? epoch_loss / double(epoch_batches) : 0.0) << valid_text << buf << "\n";
          ctx.out.flush();
        }
      }
      if (detail::stop_requested) state = "stopped";
      // the final evaluation
      if (has_valid && last_eval_step != step) evaluate("valid", true);
      if (h->data().has("test")) evaluate("test", true);
      std::map<std::string, double> flat(st.last.begin(), st.last.end());
      write_checkpoint("final", flat);
      note_checkpoint("final", flat);
    } catch (nitro::error const& x) {
      state = x.code() == "E-TRAIN-001" ? "diverged" : "failed";
      st.error = x.what();
    } catch (std::exception const& x) {
      state = "failed";
      st.error = x.what();
    }
    st.state = state;
    st.step = step;
    st.epoch = epoch;
    st.finished = iso_time_now();
    rec.append_metrics({{"type", "end"}, {"state", state}, {"step", step}, {"epoch", epoch}}, true);
    rec.write_status(st.json());

    res.state = state;
    res.metrics = st.last;
    res.exit_code = state == "finished" ? exit_ok : exit_failed;
    if (!o.quiet || state != "finished") {
      std::string line = state + ": " + rec.dir();
      for (auto const& [k, v] : st.last)
        if (k.rfind("train/", 0) != 0) line += "  " + k + " " + metric_text(v);
      ctx.out << line << "\n";
      if (!st.error.empty()) ctx.err << st.error << "\n";
    }
    return res;
  }
};

}  // namespace nitro::cli
