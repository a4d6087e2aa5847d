// nitro/train/show.hpp — show(nitro): the handle and, under it, its bindings, as text.
//
//   nitro::show(h);                          // prints h.description() to stdout
//   std::string s = nitro::show_text(desc);  // the same text (the logger's binding_report)
//
// The text is made from plain description structs, so whoever knows a part fills it: the handle
// its experiment fields, keywords, data splits and transfer set; the optimizer its parameter
// groups, schedule keys and, per scheduled value, the field it lands in, named by its path inside
// the group's rule (sam.adamw.beta1, chain.2.momentum). Layout (golden-tested on real handles in
// tests/unit/test_trainer.cpp and test_trainer_e2e.cpp):
//
//   Nitro FashionMLP<256>
//     program     FashionMLP<256>  [width=256]
//     backend     cpu (Eigen), gemm avx512
//     model       chain(dense<784, 256, relu>, dense<256, 10>)
//     parameters  203530 in 1 flat buffer, state 0
//     fields
//       width      GraphConst  256
//       ...
//     run keywords
//       seed  1  default
//       ...
//   bindings
//     data fashion_mnist
//       split  samples  batches  batch  prefetch
//       train    55000      429    128  loader thread, 2 ahead, shuffled; to_device(img, label); host only: idx
//     hooks
//       forward(img) -> loss(label), metrics(label)
//     gradient_clip_norm  none
//     schedules
//       key  source  binds to  curve
//     parameter groups
//       group  params  rate  ratio  anchor  decay  rule
//     optimizer  sam(adamw(beta1=0.9, beta2=0.999, eps=1e-08), rho=0.05)
//       scheduled value  group    lands in
//       eta              default  eta
//       beta1            default  sam.adamw.beta1
#pragma once

#include "nitro/bind/binding.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/core/cache_stats.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/nn/metrics.hpp"
#include "nitro/core/runtime.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/string.hpp>

#include <cstdint>      // int64_t
#include <cstdio>       // printing
#include <string>       // text
#include <string_view>  // hook names
#include <vector>       // rows

namespace nitro {

struct show_field {
  std::string name, residency, value;
};
struct show_split {
  std::string name;
  std::int64_t samples = 0, batches = 0, batch_size = 0;
  std::string prefetch;  // how batches reach the step: "loader thread, 2 ahead, shuffled; to_device(img, label); host only: idx"
};
struct show_schedule {
  std::string key;       // as written: "eta", "smoothing", "opt.encoder.eta"
  std::string source;    // where the key came from: "keyword", "accessor"
  std::string binds_to;  // what it resolved to: "opt.eta (rule field, every group)", "device.smoothing"
  std::string curve;     // the factory: "one_cycle(0.001)", "0.1"
};
struct show_group {
  std::string name;
  std::int64_t params = 0;
  double rate = 0;       // the group's learning rate at the start
  double ratio = 1;      // learning_rate(e, group) / learning_rate(e)
  std::string anchor;    // decay anchor: zero, w0, array
  double decay = 0;      // lambda
  std::string rule;      // "adamw(beta1=0.9, beta2=0.999, eps=1e-08)"
};
struct show_landing {
  std::string key;       // the scheduled value
  std::string group;     // the parameter group; empty for a Device field
  std::string field;     // the field's path in the group's rule: "sam.adamw.beta1", "chain.2.momentum", "eta"
};

struct handle_description {
  std::string experiment;     // the program key, "FashionMLP<256>"
  std::string graph_consts;   // "width=256"
  std::string backend;
  std::string model;
  std::int64_t parameters = 0, state = 0;
  int parameter_buffers = 1;
  std::vector<show_field> fields;
  std::vector<keyword_record> keywords;
  std::string data;
  std::vector<show_split> splits;
  std::vector<std::string> hooks;  // one line each
  double gradient_clip_norm = 0;
  std::vector<show_schedule> schedules;
  std::vector<show_group> groups;
  std::string optimizer;           // the rules: "sam(adamw(beta1=0.9, ...), rho=0.05)"; per group when they differ
  std::vector<show_landing> landings;
};

// The text of a description (the layout above).
NITRO_RUNTIME_INLINE std::string show_text(handle_description const& d);

// ---- filling the description from what the compiler knows -----------------------------------------

// Every adapted field of the experiment: name, residency, current value.
template <class E>
std::vector<show_field> describe_fields(E const& e) {
  std::vector<show_field> out;
  for_each_field<E>([&](auto d) {
    using D = decltype(d);
    std::string value;
    if constexpr (D::residency == residency::graph_const) value = keyword_text(D::type::value);
    else if constexpr (D::residency == residency::device) value = keyword_text(D::get(e).get());
    else value = keyword_text(D::get(e));
    out.push_back({std::string(D::name.view()), to_string(D::residency), std::move(value)});
  });
  return out;
}

// How a batch reaches the step: the loader, then the fields that cross to the device and those
// that stay on the host (the transfer set of binding B).
template <class B>
std::string describe_transfers() {
  using Batch = typename B::batch;
  std::string moved, stays;
  boost::hana::for_each(boost::hana::accessors<Batch>(), [&](auto acc) {
    using Key = std::remove_cvref_t<decltype(boost::hana::first(acc))>;
    std::string name = boost::hana::to<char const*>(Key{});
    std::string& into = B::template transferred<Key> ? moved : stays;
    into += (into.empty() ? "" : ", ") + name;
  });
  std::string s = "to_device(" + moved + ")";
  if (!stays.empty()) s += "; host only: " + stays;
  return s;
}

// One split's row.
NITRO_RUNTIME_INLINE show_split describe_split(std::string name, std::int64_t samples, std::int64_t batch_size, bool drop_last, int prefetch,
                                               bool shuffle, std::string const& transfers);

// The batch fields a hook's input declares, as "forward(img)"; empty when the hook is absent.
template <class HookInput>
std::string hook_fields_text(std::string_view hook) {
  if constexpr (HookInput::kind == hook_input_kind::absent) {
    return {};
  } else if constexpr (HookInput::kind == hook_input_kind::whole_batch) {
    return std::string(hook) + "(whole batch)";
  } else {
    std::string f;
    if constexpr (is_hana_struct_v<typename HookInput::input>)
      boost::hana::for_each(boost::hana::accessors<typename HookInput::input>(), [&](auto acc) {
        f += (f.empty() ? "" : ", ") + std::string(boost::hana::to<char const*>(boost::hana::first(acc)));
      });
    return std::string(hook) + "(" + f + ")";
  }
}

// Everything a handle knows without its optimizer: program, model, fields, keywords (`kw` is the
// handle's run_keywords), splits with their prefetch path and transfer set, hooks, where metrics
// accumulate, the clip threshold. The optimizer fills groups, schedules, optimizer and landings.
template <class Handle, class Keywords>
handle_description describe_handle(Handle const& h, Keywords const& kw) {
  using E = typename Handle::experiment_type;
  using B = typename Handle::binding_type;
  handle_description d;
  d.experiment = program_key<E>();
  d.graph_consts = graph_const_values<E>();
  d.backend = h.backend().name();
  if constexpr (requires { h.backend().kernels(); }) d.backend += ", " + h.backend().kernels();
  d.model = h.model().describe();
  d.parameters = param_store<typename Handle::param_spec>::count;
  d.state = param_store<typename Handle::state_spec>::count;
  d.fields = describe_fields(h.experiment());
  d.keywords = kw.records();
  d.data = h.data().name;
  const std::string transfers = describe_transfers<B>();
  for (auto const& s : h.data().splits) {
    const auto lo = h.loader_options_for(s.name());  // what the handle's loaders do, not a copy of it
    d.splits.push_back(describe_split(s.name(), s.size(), lo.batch_size, lo.drop_last, lo.prefetch, lo.shuffle, transfers));
  }
  std::string line = hook_fields_text<typename B::forward_input>("forward");
  std::string downstream;
  for (std::string x : {hook_fields_text<typename B::loss_input>("loss"), hook_fields_text<typename B::metrics_input>("metrics")})
    if (!x.empty()) downstream += (downstream.empty() ? "" : ", ") + x;
  if (!downstream.empty()) line += " -> " + downstream;
  d.hooks.push_back(line);
  if constexpr (B::has_metrics)
    d.hooks.push_back(std::string("metrics accumulate on ") + (metrics_residency_of<hook::metrics>(h.experiment()) == residency::device ? "device" : "host") +
                      "; finalize_metrics runs on " +
                      (metrics_residency_of<hook::finalize_metrics>(h.experiment()) == residency::device ? "device" : "host"));
  else  // nothing accumulates but the loss: say that, not where absent reducers would live
    d.hooks.push_back("no metrics hook: the loss is the metric (a mean over batches)");
  if (h.step_memory().device() == device_kind::cpu)  // the residencies above, as memory
    d.hooks.push_back("copies: none (the cpu backend's device memory is host memory: to_device and the metrics' read-back pass views)");
  else  // train/device_params.hpp: the host's stores stay the master copy
    d.hooks.push_back(std::string("copies: the parameters and the model's state to ") + to_string(h.step_memory().device()) +
                      " before each micro-batch and evaluation, the gradient back once a step (the optimizer updates the host's master copy)");
  d.gradient_clip_norm = kw.gradient_clip_norm.value;
  return d;
}

// Prints a handle's description (handles provide description()).
template <class Handle>
  requires requires(Handle const& h) { h.description(); }
void show(Handle const& h, std::FILE* out = stdout) {
  std::fputs(show_text(h.description()).c_str(), out);
  std::fflush(out);
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <algorithm>  // max

namespace nitro {

namespace detail {

NITRO_RUNTIME_INLINE std::string show_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Columns: left-aligned text unless right[c].
NITRO_RUNTIME_INLINE std::string show_table(std::vector<std::vector<std::string>> const& rows, std::vector<bool> const& right, std::string const& indent) {
  std::vector<std::size_t> w;
  for (auto const& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (w.size() <= c) w.push_back(0);
      w[c] = std::max(w[c], r[c].size());
    }
  std::string s;
  for (auto const& r : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (c) line += "  ";
      const std::size_t pad = w[c] - r[c].size();
      const bool ra = c < right.size() && right[c];
      line += ra ? std::string(pad, ' ') + r[c] : r[c] + std::string(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  }
  return s;
}

}  // namespace detail

NITRO_RUNTIME_INLINE std::string show_text(handle_description const& d) {
  std::string s = "Nitro " + d.experiment + "\n";
  {
    std::vector<std::vector<std::string>> head;
    head.push_back({"program", d.experiment + (d.graph_consts.empty() ? "" : "  [" + d.graph_consts + "]")});
    head.push_back({"backend", d.backend});
    head.push_back({"model", d.model});
    head.push_back({"parameters", std::to_string(d.parameters) + " in " + std::to_string(d.parameter_buffers) +
                                      (d.parameter_buffers == 1 ? " flat buffer" : " flat buffers") + ", state " + std::to_string(d.state)});
    s += detail::show_table(head, {}, "  ");
  }
  if (!d.fields.empty()) {
    s += "  fields\n";
    std::vector<std::vector<std::string>> rows;
    for (auto const& f : d.fields) rows.push_back({f.name, f.residency, f.value});
    s += detail::show_table(rows, {}, "    ");
  }
  if (!d.keywords.empty()) {
    s += "  run keywords\n";
    std::vector<std::vector<std::string>> rows;
    for (auto const& k : d.keywords) {
      std::vector<std::string> r = {k.name, k.value, to_string(k.source)};
      if (!k.note.empty()) r.push_back("(" + k.note + ")");
      rows.push_back(std::move(r));
    }
    s += detail::show_table(rows, {}, "    ");
  }
  s += "bindings\n";
  s += "  data " + (d.data.empty() ? std::string("(none)") : d.data) + "\n";
  if (!d.splits.empty()) {
    std::vector<std::vector<std::string>> rows = {{"split", "samples", "batches", "batch", "prefetch"}};
    for (auto const& sp : d.splits)
      rows.push_back({sp.name, std::to_string(sp.samples), std::to_string(sp.batches), std::to_string(sp.batch_size), sp.prefetch});
    s += detail::show_table(rows, {false, true, true, true, false}, "    ");
  }
  if (!d.hooks.empty()) {
    s += "  hooks\n";
    for (auto const& h : d.hooks) s += "    " + h + "\n";
  }
  s += "  gradient_clip_norm  " + (d.gradient_clip_norm > 0 ? detail::show_number(d.gradient_clip_norm) + " (global norm, before every group)" : std::string("none")) + "\n";
  s += "  schedules";
  if (d.schedules.empty()) {
    s += "  none\n";
  } else {
    s += "\n";
    std::vector<std::vector<std::string>> rows = {{"key", "source", "binds to", "curve"}};
    for (auto const& k : d.schedules) rows.push_back({k.key, k.source, k.binds_to, k.curve});
    s += detail::show_table(rows, {}, "    ");
  }
  if (!d.groups.empty()) {
    s += "  parameter groups\n";
    std::vector<std::vector<std::string>> rows = {{"group", "params", "rate", "ratio", "anchor", "decay", "rule"}};
    for (auto const& g : d.groups)
      rows.push_back({g.name, std::to_string(g.params), detail::show_number(g.rate), detail::show_number(g.ratio), g.anchor,
                      detail::show_number(g.decay), g.rule});
    s += detail::show_table(rows, {false, true, true, true, false, true, false}, "    ");
  }
  if (!d.optimizer.empty()) {
    s += "  optimizer  " + d.optimizer + "\n";
    if (!d.landings.empty()) {
      std::vector<std::vector<std::string>> rows = {{"scheduled value", "group", "lands in"}};
      for (auto const& l : d.landings) rows.push_back({l.key, l.group.empty() ? "-" : l.group, l.field});
      s += detail::show_table(rows, {}, "    ");
    }
  }
  return s;
}

// One split's row.
NITRO_RUNTIME_INLINE show_split describe_split(std::string name, std::int64_t samples, std::int64_t batch_size, bool drop_last, int prefetch,
                                               bool shuffle, std::string const& transfers) {
  show_split s;
  s.name = std::move(name);
  s.samples = samples;
  s.batch_size = batch_size;
  s.batches = batch_size > 0 ? (drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size) : 0;
  s.prefetch = "loader thread, " + std::to_string(prefetch) + " ahead" + (shuffle ? ", shuffled" : "") + (drop_last ? ", full batches" : "") + "; " +
               transfers;
  return s;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
