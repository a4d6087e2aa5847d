// nitro/optim/program.hpp — the optimizer program: groups, flat buffers, rules, decay, clipping, SAM, schedules.
//
// One program per handle. It is built by the compiler from the experiment's hooks (hooks.hpp) and
// the schedule map (schedule_map.hpp, resolved in resolve.hpp), and at setup from the initial
// weights (anchors, per-leaf flags) and the horizon (schedule factories). Each optimizer step:
//   begin_step(e)     writes every schedule's value for the upcoming step t (from 1): Device fields
//                     of e, and the fields (eta, lambda, rule fields) of the groups they drive
//   (the handle runs forward/backward, accumulating the gradient into the flat gradient buffer;
//    with SAM: perturb() after a first pass into sam_grads(), restore() after the second)
//   update(scale)     scales the accumulated gradient (1/accum), clips it to gradient_clip_norm by
//                     its global norm over every group, then applies each group's rule ONCE over
//                     the group's contiguous span: u = rule(g); decayed leaves w <- w - eta*lambda*(w - anchor);
//                     w <- w - eta*u  (a long span in fixed pieces on the backend's threads:
//                     the same bits on any number of threads)
// Each group owns one contiguous span of the parameter and gradient buffers and one flat buffer
// per rule state; nothing is allocated after construction. state_tensors()/load_state() export
// and import every buffer, the anchors and the step count (which is the schedules' position), as
// named flat tensors, for exact resume. describe() is the text show() prints.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/core/tree.hpp"
#include "nitro/optim/anchor.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/hooks.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/optim/resolve.hpp"
#include "nitro/optim/rule.hpp"
#include "nitro/optim/rules/adam.hpp"
#include "nitro/optim/rules/decayed_weights.hpp"
#include "nitro/optim/rules/lion.hpp"
#include "nitro/optim/rules/sgd.hpp"
#include "nitro/optim/sam.hpp"
#include "nitro/optim/schedule.hpp"
#include "nitro/optim/schedule_map.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/tensor.hpp"

#include <algorithm>    // sort, min, max
#include <array>        // per-group tables
#include <cmath>        // sqrt, abs, isfinite
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf for describe
#include <cstring>      // memcpy
#include <memory>       // unique_ptr
#include <string>       // names, describe
#include <string_view>  // names
#include <tuple>        // groups, curves
#include <type_traits>  // traits
#include <utility>      // index_sequence
#include <variant>      // state entries: float or int64
#include <vector>       // runs, state entries

namespace nitro::optim {

struct program_options {
  double gradient_clip_norm = 0;  // global norm threshold; 0: no clipping
  int accum = 1;                  // micro-batches per optimizer step (shown; the handle accumulates)
  std::int64_t horizon = 0;       // total optimizer steps the schedules are made for
};

// One named flat tensor of the optimizer's state: float buffers, or the int64 step count.
struct state_entry {
  std::string name;
  std::variant<Tensor, Index> value;
};

// What show() prints for a group (also for tests and loggers).
struct group_info {
  std::string name;
  std::size_t leaves = 0;
  std::int64_t params = 0;
  double rate = 0;               // eta this step (after the ratio)
  double ratio = 1;              // learning_rate(group) / learning_rate()
  std::string anchor;            // zero | w0 | values
  double lambda = 0;             // decoupled decay this step
  std::size_t decayed_leaves = 0;
  std::string rule;              // the rule with this step's field values
};

// A schedule key as show() prints it: the key, what it drives, the factory.
struct schedule_info {
  std::string key;       // as written: "eta", "opt.head.eta", "smoothing"
  std::string binds_to;  // "opt: encoder.eta (x0.5), head.eta (x1)" or "device: smoothing (written each step)"
  std::string curve;     // "one_cycle(max 0.003, ...)", "0.1", "a factory of the horizon"
};
// Where one key's value lands: one row per group field it drives (or the Device field).
struct schedule_landing {
  std::string key;
  std::string group;     // "encoder"; empty for a Device field
  std::string field;     // the field's path in the group's program: "asam.adamw.beta1", "eta"; "device.smoothing"
};

namespace detail {

template <std::size_t I, class L> struct tnth;
template <std::size_t I, class H, class... R> struct tnth<I, nitro::detail::tlist<H, R...>> : tnth<I - 1, nitro::detail::tlist<R...>> {};
template <class H, class... R> struct tnth<0, nitro::detail::tlist<H, R...>> { using type = H; };

inline constexpr std::array<domain, 2> program_domains{domain::nonnegative, domain::nonnegative};  // eta, lambda

struct run {  // a stretch of a group's span whose leaves share their flags
  std::int64_t begin = 0, end = 0;  // relative to the group's offset
  bool decay = false;
  bool perturb = false;
  bool adaptive = false;
};

// The compile-time description of group GI.
template <class E, class Layout, std::size_t GI>
struct group_traits {
  using tag = typename tnth<GI, typename Layout::groups>::type;
  using rule_type = rule_for_t<E, tag>;
  using anchor_type = anchor_for_t<E, tag>;
  using fields = program_fields<rule_type>;
  using paths = program_paths<rule_type>;  // each field's path inside the rule: eta, lambda, adamw.beta1
  static constexpr std::size_t field_count = fields::size;
  static constexpr std::size_t state_count = rule_type::states::size;
  static constexpr bool has_anchor = !std::is_same_v<anchor_type, anchor::zero_t>;
  static constexpr bool sam = perturbs<rule_type>::value;
  static constexpr bool adaptive = [] {
    if constexpr (sam) return rule_type::adaptive;
    else return false;
  }();
  static constexpr domain field_domain(std::size_t f) noexcept {
    return f < 2 ? program_domains[f] : rule_type::domains[f - 2];
  }
};

// Run-time state of one group.
template <class Traits>
struct group_state {
  typename Traits::rule_type rule;
  std::array<double, Traits::field_count> static_values{};
  std::array<double, Traits::field_count> values{};
  double ratio = 1;
  std::array<std::unique_ptr<float[], nitro::detail::free_deleter>, Traits::state_count> states;
  std::unique_ptr<float[], nitro::detail::free_deleter> anchor;
  std::vector<run> runs;
  std::size_t decayed_leaves = 0;
};

// Finds a leaf's tensor in an anchor source (a tree of tensors, or keypath -> Tensor).
template <class Source>
Tensor anchor_lookup(Source const& src, std::string_view path) {
  if constexpr (is_tree_v<Source>) {
    Tensor const* t = find_leaf<Tensor const>(src, path);
    return t ? *t : Tensor{};
  } else if constexpr (std::is_invocable_r_v<Tensor, Source const&, std::string_view>) {
    return src(path);
  } else {
    static_assert(always_false<Source>,
                  "E-OPT-004: nitro::anchor::values(source) is given something that is neither a tree of tensors nor a "
                  "keypath lookup. Fix: pass a tree shaped like ps, or a callable Tensor(std::string_view keypath).");
    return {};
  }
}

// Sum of squares in double, vectorised (the global norm for clipping): float within a chunk of
// 4096, double across. A long span is cut into at most 64 pieces of whole chunks, summed on the
// backend's threads (for_each_share) and then in order: the pieces, and so the sum's bits, depend
// on n alone, never on how many threads ran them.
inline double sum_of_squares(float const* p, std::int64_t n) {
  constexpr std::int64_t chunk = 4096, max_pieces = 64;
  auto sum = [p](std::int64_t begin, std::int64_t end) {
    double total = 0;
    for (std::int64_t i = begin; i < end; i += chunk) {
      const std::int64_t m = end - i < chunk ? end - i : chunk;
      total += double(arr(p + i, m).matrix().squaredNorm());
    }
    return total;
  };
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  const std::int64_t piece = std::max<std::int64_t>(16, (chunks + max_pieces - 1) / max_pieces) * chunk;
  const std::int64_t pieces = (n + piece - 1) / piece;
  if (pieces <= 1) return sum(0, n);
  std::array<double, max_pieces> part{};
  nitro::detail::active_ops().for_each_share(pieces, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k) part[std::size_t(k)] = sum(k * piece, std::min((k + 1) * piece, n));
  });
  double total = 0;
  for (std::int64_t k = 0; k < pieces; ++k) total += part[std::size_t(k)];
  return total;
}

template <class F>
std::string schedule_text(F const& f) {
  if constexpr (requires { { f.describe() } -> std::convertible_to<std::string>; }) return f.describe();
  else return "a factory of the horizon";
}

}  // namespace detail

template <class E, class Spec, class Schedules = schedule_map<>>
class program {
  static_assert(is_schedule_map<Schedules>::value, "E-SCHED-011: the optimizer program's schedules are not a nitro::schedule_map. Fix: return nitro::schedule_map{nitro::key<\"eta\"> = ...} from schedules().");

 public:
  using layout = group_layout<E, Spec>;
  using store_type = param_store<Spec, float, layout>;
  using groups = typename layout::groups;
  static constexpr std::size_t group_count = layout::group_count;

 private:
  template <std::size_t GI> using traits = detail::group_traits<E, layout, GI>;
  template <class Seq> struct states_of;
  template <std::size_t... GI> struct states_of<std::index_sequence<GI...>> {
    using type = std::tuple<detail::group_state<traits<GI>>...>;
    using fields = std::tuple<typename traits<GI>::paths...>;
    using ns = detail::opt_namespace<typename traits<GI>::paths...>;
  };
  using group_seq = std::make_index_sequence<group_count>;
  using group_states = typename states_of<group_seq>::type;
  using group_fields = typename states_of<group_seq>::fields;
  using ns = typename states_of<group_seq>::ns;

  // ---- compile-time checks: hooks and keys ------------------------------------------------------
  static constexpr bool hooks_checked = detail::per_group_hook_checked<hook::learning_rate, E, layout>() &&
                                        detail::per_group_hook_checked<hook::lambda, E, layout>() &&
                                        detail::per_group_hook_checked<hook::decay_anchor, E, layout>() &&
                                        detail::per_group_hook_checked<hook::optimizer, E, layout>();
  static_assert(checks_evaluated<hooks_checked, detail::leaf_hooks_checked<E, nitro::detail::leaf_paths_of<Spec>>::value>);

  template <class M> struct keys_of;
  template <class... En> struct keys_of<schedule_map<En...>> {
    static constexpr std::size_t count = sizeof...(En);
    static constexpr std::array<std::string_view, sizeof...(En)> names{En::key.view()...};
    static constexpr bool checked = (detail::check_key<E, layout, ns, group_fields, En::key>() && ...);
    using curves = std::tuple<std::remove_cvref_t<decltype(std::declval<typename En::factory_type const&>()(std::int64_t{1}))>...>;
    template <std::size_t I> using entry = typename nitro::detail::nth<I, En...>::type;
  };
  using keys = keys_of<std::conditional_t<schedule_entries_valid<Schedules>, Schedules, schedule_map<>>>;
  static_assert(checks_evaluated<keys::checked>);
  static constexpr std::size_t key_count = keys::count;
  static constexpr auto resolutions = [] {
    std::array<detail::key_resolution, key_count> r{};
    for (std::size_t k = 0; k < key_count; ++k) r[k] = detail::resolve_key<E, layout, ns>(keys::names[k]);
    return r;
  }();
  static constexpr std::pair<int, int> duplicate_keys = [] {
    for (std::size_t i = 0; i < key_count; ++i)
      for (std::size_t j = i + 1; j < key_count; ++j)
        if (detail::same_slot<ns>(resolutions[i], resolutions[j])) return std::pair<int, int>{int(i), int(j)};
    return std::pair<int, int>{-1, -1};
  }();
  static constexpr bool no_duplicates = [] {
    if constexpr (duplicate_keys.first < 0) return true;
    else
      return schedule_keys_bind_the_same_slot<str_of<keys::template entry<std::size_t(duplicate_keys.first)>::key>,
                                              str_of<keys::template entry<std::size_t(duplicate_keys.second)>::key>>::ok;
  }();
  static_assert(checks_evaluated<no_duplicates>);

  // source[g][f]: the key driving field f of group g (a path key over a bare one), or -1
  template <std::size_t GI>
  static constexpr auto sources_of() {
    using F = typename traits<GI>::paths;
    std::array<int, F::size> s{};
    for (std::size_t f = 0; f < F::size; ++f) {
      int path = -1, bare = -1;
      for (std::size_t k = 0; k < key_count; ++k) {
        auto const& r = resolutions[k];
        if (!names_path(F::views[f], r.field)) continue;
        if (r.status == detail::key_status::opt_group && r.group == int(GI)) path = int(k);
        if (r.status == detail::key_status::opt_all) bare = int(k);
      }
      s[f] = path >= 0 ? path : bare;
    }
    return s;
  }

 public:
  static constexpr bool two_pass = [] {
    return []<std::size_t... GI>(std::index_sequence<GI...>) { return (traits<GI>::sam || ...); }(group_seq{});
  }();

  // Built after the model is initialised: `store` holds the initial weights (w0, the x of the leaf
  // hooks). `w0` (optional) is a tree of tensors shaped like ps overriding w0.
  template <class W0 = std::nullptr_t>
  program(E const& e, store_type& store, Schedules const& schedules, program_options options, W0 const& w0 = nullptr)
      : m_store(&store),
        m_options(options),
        m_curves(make_curves(schedules, options.horizon)) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((m_key_texts[K] = detail::schedule_text(std::get<K>(schedules.entries).factory)), ...);
    }(std::make_index_sequence<key_count>{});
    if (!(options.gradient_clip_norm >= 0) || !std::isfinite(options.gradient_clip_norm))
      throw error("E-OPT-014", "gradient_clip_norm is " + detail::format_number(options.gradient_clip_norm) + "; it must be a finite number >= 0",
                  "use 0 for no clipping, or a positive threshold such as 1.0");
    if (options.accum < 1)
      throw error("E-OPT-015", "accum is " + std::to_string(options.accum) + "; a step needs at least one micro-batch", "use accum >= 1");
    m_base_rate = base_rate_of(e);
    if (!std::isfinite(m_base_rate) || m_base_rate < 0)
      throw error("E-OPT-010", "learning_rate() is " + detail::format_number(m_base_rate) + "; it must be a finite number >= 0",
                  "return a non-negative learning rate");
    compute_leaf_flags(e);
    [&]<std::size_t... GI>(std::index_sequence<GI...>) { (setup_group<GI>(e, w0), ...); }(group_seq{});
    validate_schedules();
    if constexpr (two_pass) {
      m_sam_grads = nitro::detail::aligned_zeros<float>(store_type::size);
      m_backup = nitro::detail::aligned_zeros<float>(store_type::size);
    }
    m_values.fill(0);
    write_fields(1, nullptr);  // the values step 1 will use, readable before training
  }
  program(program const&) = delete;
  program& operator=(program const&) = delete;

  // ---- the step -----------------------------------------------------------------------------------
  // Writes every schedule's value for the upcoming step (steps() + 1) into the Device fields of `e`
  // and the fields of the groups.
  void begin_step(E& e) { write_fields(m_step + 1, &e); }

  // Scales the accumulated gradient by `grad_scale`, clips it by its global norm, applies each
  // group's rule once over its span, and counts the step.
  void update(float grad_scale = 1.0f) {
    float const* grads = m_store->grads();
    double scale = grad_scale;
    if (m_options.gradient_clip_norm > 0) {
      double sq = 0;
      for (std::size_t g = 0; g < group_count; ++g) {
        group_span const& s = store_type::groups[g];
        sq += detail::sum_of_squares(grads + s.offset, s.size);
      }
      m_last_norm = std::sqrt(sq) * double(grad_scale);
      scale *= rule_math::clip_scale(m_last_norm, m_options.gradient_clip_norm);
    }
    ++m_step;
    [&]<std::size_t... GI>(std::index_sequence<GI...>) { (update_group<GI>(float(scale)), ...); }(group_seq{});
  }

  // ---- SAM ----------------------------------------------------------------------------------------
  // The buffer the first pass accumulates into (laid out like the store). Null without SAM.
  float* sam_grads() noexcept { return m_sam_grads.get(); }
  // w <- w + e from the first pass's gradient; the weights are kept for restore().
  void perturb() {
    if constexpr (two_pass) {
      float* w = m_store->values();
      float const* g = m_sam_grads.get();
      std::memcpy(m_backup.get(), w, sizeof(float) * std::size_t(store_type::size));
      double sq = 0;
      for_each_group([&]<std::size_t GI>(auto& gs) {
        if constexpr (traits<GI>::sam) {
          const float eta_a = traits<GI>::adaptive ? float(gs.values[2 + traits<GI>::rule_type::adaptive_eta_index]) : 0.f;
          const std::int64_t off = store_type::groups[GI].offset;
          for (auto const& r : gs.runs) {
            if (!r.perturb) continue;
            auto G = detail::arr(g + off + r.begin, r.end - r.begin);
            if (r.adaptive) sq += double(((detail::arr(w + off + r.begin, r.end - r.begin).abs() + eta_a) * G).matrix().squaredNorm());
            else sq += double(G.matrix().squaredNorm());
          }
        }
      });
      const double norm = std::sqrt(sq);
      for_each_group([&]<std::size_t GI>(auto& gs) {
        if constexpr (traits<GI>::sam) {
          const float eta_a = traits<GI>::adaptive ? float(gs.values[2 + traits<GI>::rule_type::adaptive_eta_index]) : 0.f;
          const float k = float(gs.values[2 + traits<GI>::rule_type::rho_index] / (norm + 1e-12));
          const std::int64_t off = store_type::groups[GI].offset;
          for (auto const& r : gs.runs) {
            if (!r.perturb) continue;
            auto W = detail::arr(w + off + r.begin, r.end - r.begin);
            auto G = detail::arr(g + off + r.begin, r.end - r.begin);
            if (r.adaptive) rule_math::sam_ascent<true>(W, G, eta_a, k);
            else rule_math::sam_ascent<false>(W, G, eta_a, k);
          }
        }
      });
      m_last_sam_norm = norm;
    }
  }
  void restore() {
    if constexpr (two_pass) std::memcpy(m_store->values(), m_backup.get(), sizeof(float) * std::size_t(store_type::size));
  }

  // ---- what it holds ------------------------------------------------------------------------------
  std::int64_t steps() const noexcept { return m_step; }
  std::int64_t horizon() const noexcept { return m_options.horizon; }
  double base_rate() const noexcept { return m_base_rate; }
  double gradient_clip_norm() const noexcept { return m_options.gradient_clip_norm; }
  int accum() const noexcept { return m_options.accum; }
  double last_gradient_norm() const noexcept { return m_last_norm; }  // before clipping (0 when clipping is off)
  std::int64_t chain_applications() const noexcept { return m_chain_calls; }  // group updates since construction

  // The current value of a group's field (eta, lambda, beta1, ...): what the coming or last step
  // uses. The field is named as a schedule key names it: by its path in the rule or a tail of it
  // (beta1, adamw.beta1, sam.adamw.beta1; chain.2.momentum where two rules have a momentum).
  double field(std::string_view group_name, std::string_view field_name) const {
    double out = 0;
    bool found_group = false;
    std::string named;  // the paths field_name names in the group
    std::size_t count = 0;
    for_each_group([&]<std::size_t GI>(auto const& gs) {
      if (layout::group_names[GI] != group_name) return;
      found_group = true;
      using P = typename traits<GI>::paths;
      for (std::size_t f = 0; f < P::size; ++f)
        if (names_path(P::views[f], field_name)) {
          out = gs.values[f];
          named += (count++ ? ", " : "") + std::string(P::views[f]);
        }
    });
    if (!found_group) throw error("E-OPT-018", "the optimizer has no group called '" + std::string(group_name) + "' (it has: " + group_list() + ")", "name a group param_group produces");
    if (count == 0) throw error("E-OPT-018", "group '" + std::string(group_name) + "' has no field '" + std::string(field_name) + "'", "name a field of the group's rule (see describe())");
    if (count > 1)
      throw error("E-OPT-018", "in group '" + std::string(group_name) + "', '" + std::string(field_name) + "' names " + std::to_string(count) + " fields: " + named,
                  "name one by its path");
    return out;
  }

  std::vector<group_info> group_infos() const {
    std::vector<group_info> out;
    for_each_group([&]<std::size_t GI>(auto const& gs) {
      group_span const& s = store_type::groups[GI];
      out.push_back({std::string(layout::group_names[GI]), s.leaves, s.count, gs.values[0], gs.ratio,
                     std::string(traits<GI>::anchor_type::name), gs.values[1], gs.decayed_leaves, gs.rule.describe(gs.values.data() + 2)});
    });
    return out;
  }

  // The bindings as show() prints them: clip, accumulation, horizon, one row per group, then every
  // schedule key with the slots it drives.
  std::string describe() const {
    std::string s = "optimizer: " + std::to_string(group_count) + (group_count == 1 ? " group" : " groups") + ", learning_rate " +
                    detail::format_number(m_base_rate) + ", gradient_clip_norm " +
                    (m_options.gradient_clip_norm > 0 ? detail::format_number(m_options.gradient_clip_norm) + " (global norm, before every group)" : std::string("off")) +
                    ", accum " + std::to_string(m_options.accum) + ", horizon " + std::to_string(m_options.horizon) + " steps" +
                    (two_pass ? ", two passes (SAM)" : "") + "\n";
    s += "  group        leaves     params  rate        ratio   anchor  decay                rule\n";
    for (auto const& g : group_infos()) {
      char row[160];
      std::snprintf(row, sizeof row, "  %-12s %6zu %10lld  %-10s  %-6s  %-6s  %-9s on %2zu/%-3zu  ", g.name.c_str(), g.leaves, (long long)g.params,
                    detail::format_number(g.rate).c_str(), detail::format_number(g.ratio).c_str(), g.anchor.c_str(),
                    detail::format_number(g.lambda).c_str(), g.decayed_leaves, g.leaves);
      s += row + g.rule + "\n";
    }
    if (key_count == 0) s += "  schedules: none (each group uses its learning_rate)\n";
    else s += "  schedules:\n";
    describe_keys(s);
    return s;
  }

  // ---- state for checkpoints ----------------------------------------------------------------------
  // Every buffer the next step depends on, as named flat tensors viewing the program's memory:
  //   optim.step                 Index[1]   optimizer steps taken (the schedules' position)
  //   optim.<group>.<state>      Tensor[n]  each rule state buffer of the group (n: the group's span)
  //   optim.<group>.anchor       Tensor[n]  the decay anchor (w0 or values), when not zero
  std::vector<state_entry> state_tensors() {
    std::vector<state_entry> out;
    out.push_back({"optim.step", Index(&m_step, shape{1})});
    for_each_group([&]<std::size_t GI>(auto& gs) {
      const std::int64_t n = store_type::groups[GI].size;
      const std::string prefix = "optim." + std::string(layout::group_names[GI]) + ".";
      for (std::size_t k = 0; k < traits<GI>::state_count; ++k)
        out.push_back({prefix + std::string(traits<GI>::rule_type::states::views[k]), Tensor(gs.states[k].get(), shape{n})});
      if constexpr (traits<GI>::has_anchor) out.push_back({prefix + "anchor", Tensor(gs.anchor.get(), shape{n})});
    });
    return out;
  }
  // Copies the entries named optim.* in (other names are ignored: a checkpoint holds more). Every
  // expected entry must be present with its size and type; an unknown optim.* name is an error.
  void load_state(std::vector<state_entry> const& entries) {
    auto mine = state_tensors();
    for (auto const& in : entries) {
      if (!in.name.starts_with("optim.")) continue;
      bool known = false;
      for (auto const& m : mine) known = known || m.name == in.name;
      if (!known)
        throw error("E-OPT-017", "the optimizer state has an entry '" + in.name + "' this program does not have", "load a state saved by a program with the same groups and rules");
    }
    for (auto& m : mine) {
      state_entry const* found = nullptr;
      for (auto const& in : entries) if (in.name == m.name) found = &in;
      if (!found) throw error("E-OPT-017", "the optimizer state lacks '" + m.name + "'", "load a state saved by a program with the same groups and rules");
      if (m.value.index() != found->value.index())
        throw error("E-OPT-017", "'" + m.name + "' has the wrong element type", "load a state saved by a program with the same groups and rules");
      std::visit([&](auto& dst) {
        using T = std::remove_cvref_t<decltype(dst)>;
        T const& src = std::get<T>(found->value);
        if (src.numel() != dst.numel())
          throw error("E-OPT-017", "'" + m.name + "' has " + std::to_string(src.numel()) + " elements, this program's has " + std::to_string(dst.numel()),
                      "load a state saved by a program with the same model, groups and rules");
        std::memcpy(dst.data(), src.data(), sizeof(typename T::scalar) * std::size_t(dst.numel()));
      }, m.value);
    }
    write_fields(m_step + 1, nullptr);
  }

  // Makes the current weights the w0 anchor of every w0 group (after loading weights, say).
  void capture_w0() {
    for_each_group([&]<std::size_t GI>(auto& gs) {
      if constexpr (std::is_same_v<typename traits<GI>::anchor_type, anchor::w0_t>) {
        group_span const& s = store_type::groups[GI];
        std::memcpy(gs.anchor.get(), m_store->values() + s.offset, sizeof(float) * std::size_t(s.size));
      }
    });
  }

 private:
  // ---- setup ----------------------------------------------------------------------------------------
  // learning_rate(), else a field learning_rate, else a field lr, else 1e-3
  static double base_rate_of(E const& e) {
    if constexpr (hook::learning_rate::callable<E const>) return static_cast<double>(e.learning_rate());
    else if constexpr (requires { static_cast<double>(e.learning_rate); }) return static_cast<double>(e.learning_rate);
    else if constexpr (requires { static_cast<double>(e.lr); }) return static_cast<double>(e.lr);
    else return 1e-3;
  }

  static auto make_curves(Schedules const& s, std::int64_t horizon) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return typename keys::curves{std::get<K>(s.entries).factory(horizon)...};
    }(std::make_index_sequence<key_count>{});
  }

  template <class F>
  void for_each_group(F&& f) {
    [&]<std::size_t... GI>(std::index_sequence<GI...>) { (f.template operator()<GI>(std::get<GI>(m_groups)), ...); }(group_seq{});
  }
  template <class F>
  void for_each_group(F&& f) const {
    [&]<std::size_t... GI>(std::index_sequence<GI...>) { (f.template operator()<GI>(std::get<GI>(m_groups)), ...); }(group_seq{});
  }

  std::string group_list() const {
    std::string s;
    for (auto n : layout::group_names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }

  // no_decay, no_perturb, adaptive_perturb for every leaf (declaration order).
  void compute_leaf_flags(E const& e) {
    auto ps = m_store->view();
    std::size_t i = 0;
    for_each_leaf(ps, [&](auto kp, Tensor const& x) {
      constexpr auto path = decltype(kp)::value;
      m_no_decay[i] = detail::leaf_flag<hook::no_decay, E, path>(e, x, x.rank() < 2);
      m_no_perturb[i] = detail::leaf_flag<hook::no_perturb, E, path>(e, x, false);
      m_adaptive[i] = detail::leaf_flag<hook::adaptive_perturb, E, path>(e, x, x.rank() >= 2);
      ++i;
    });
  }

  template <std::size_t GI, class W0>
  void setup_group(E const& e, W0 const& w0) {
    using T = traits<GI>;
    using G = typename T::tag;
    auto& gs = std::get<GI>(m_groups);
    group_span const& span = store_type::groups[GI];
    const std::string gname(layout::group_names[GI]);
    gs.rule = detail::rule_for<E, G>(e);

    // eta: learning_rate(group), else the base; its ratio to the base scales eta schedules
    double rate = m_base_rate;
    if constexpr (detail::has_group_value<hook::learning_rate, E, G>()) {
      rate = detail::group_value<hook::learning_rate, E, G>(e);
      if (!std::isfinite(rate) || rate < 0)
        throw error("E-OPT-010", "learning_rate(group<\"" + gname + "\">) is " + detail::format_number(rate) + "; it must be a finite number >= 0",
                    "return a non-negative rate");
      if (m_base_rate > 0) gs.ratio = rate / m_base_rate;
      else if (rate != 0)
        throw error("E-OPT-012", "learning_rate() is 0, so group '" + gname + "''s ratio learning_rate(group) / learning_rate() is undefined",
                    "give learning_rate() the base rate the groups' rates are relative to");
    }
    double lambda = gs.rule.default_lambda;
    if constexpr (detail::has_group_value<hook::lambda, E, G>()) lambda = detail::group_value<hook::lambda, E, G>(e);
    gs.static_values[0] = rate;
    gs.static_values[1] = lambda;
    for (std::size_t f = 0; f < gs.rule.values.size(); ++f) gs.static_values[2 + f] = gs.rule.values[f];
    for (std::size_t f = 0; f < T::field_count; ++f)
      if (!in_domain(T::field_domain(f), gs.static_values[f]))
        throw error("E-OPT-010",
                    "group '" + gname + "': " + std::string(T::paths::views[f]) + " is " + detail::format_number(gs.static_values[f]) + "; it must be " +
                        to_string(T::field_domain(f)),
                    f == 1 ? "return a lambda >= 0 from lambda(group)" : "give the rule a value in range");

    for (auto& b : gs.states) b = nitro::detail::aligned_zeros<float>(span.size > 0 ? span.size : 1);

    // runs: stretches of the span whose leaves share decay / perturb flags
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < store_type::leaves.size(); ++i)
      if (store_type::leaves[i].group == int(GI)) members.push_back(i);
    std::sort(members.begin(), members.end(), [](std::size_t a, std::size_t b) { return store_type::leaves[a].offset < store_type::leaves[b].offset; });
    for (std::size_t j = 0; j < members.size(); ++j) {
      leaf_info const& li = store_type::leaves[members[j]];
      detail::run r;
      r.begin = li.offset - span.offset;
      r.end = j + 1 < members.size() ? store_type::leaves[members[j + 1]].offset - span.offset : span.size;
      r.decay = !m_no_decay[members[j]];
      r.perturb = T::sam && !m_no_perturb[members[j]];
      r.adaptive = T::adaptive && m_adaptive[members[j]];
      gs.decayed_leaves += r.decay;
      if (!gs.runs.empty() && gs.runs.back().decay == r.decay && gs.runs.back().perturb == r.perturb && gs.runs.back().adaptive == r.adaptive)
        gs.runs.back().end = r.end;
      else
        gs.runs.push_back(r);
    }

    // the anchor
    if constexpr (T::has_anchor) {
      gs.anchor = nitro::detail::aligned_zeros<float>(span.size > 0 ? span.size : 1);
      if constexpr (std::is_same_v<typename T::anchor_type, anchor::w0_t>) {
        if constexpr (std::is_same_v<W0, std::nullptr_t>)
          std::memcpy(gs.anchor.get(), m_store->values() + span.offset, sizeof(float) * std::size_t(span.size));
        else
          fill_anchor<GI>(gs, w0, "w0");
      } else {
        fill_anchor<GI>(gs, detail::anchor_for<E, G>(e).source, "decay_anchor");
      }
    }
  }

  template <std::size_t GI, class Source>
  void fill_anchor(detail::group_state<traits<GI>>& gs, Source const& src, char const* what) {
    group_span const& span = store_type::groups[GI];
    for (std::size_t i = 0; i < store_type::leaves.size(); ++i) {
      leaf_info const& li = store_type::leaves[i];
      if (li.group != int(GI)) continue;
      Tensor t = detail::anchor_lookup(src, li.keypath);
      if (!t.defined()) {
        if (m_no_decay[i]) continue;  // never decayed: its anchor is not read
        throw error("E-OPT-013", std::string(what) + " for group '" + std::string(layout::group_names[GI]) + "' has no tensor for leaf '" + std::string(li.keypath) + "'",
                    "give the anchor a tensor for every decayed leaf of the group, keyed by its keypath");
      }
      if (!(t.shape() == li.shape()))
        throw error("E-OPT-013", std::string(what) + ": leaf '" + std::string(li.keypath) + "' is " + li.shape().to_string() + " but the anchor's tensor is " + t.shape().to_string(),
                    "give a tensor of the leaf's shape");
      std::memcpy(gs.anchor.get() + (li.offset - span.offset), t.data(), sizeof(float) * std::size_t(li.numel));
    }
  }

  // Every value every schedule gives over the horizon, checked against the fields it drives.
  void validate_schedules() {
    auto fail = [&](std::size_t k, std::int64_t t, double v, std::string const& slot, char const* want) {
      throw error("E-SCHED-010",
                  "the schedule for '" + std::string(keys::names[k]) + "' gives " + detail::format_number(v) + " at step " + std::to_string(t) + " of " +
                      std::to_string(m_options.horizon) + ", but " + slot + " must be " + want,
                  "change the schedule so that every step's value is in range");
    };
    for (std::int64_t t = 1; t <= m_options.horizon; ++t) {
      eval_curves(t);
      for (std::size_t k = 0; k < key_count; ++k) {
        const double v = m_values[k];
        if (resolutions[k].status == detail::key_status::device) {
          if (!in_domain(domain::any, v)) fail(k, t, v, "Device field " + std::string(resolutions[k].field), to_string(domain::any));
          continue;
        }
        for_each_group([&]<std::size_t GI>(auto const& gs) {
          constexpr auto src = sources_of<GI>();
          for (std::size_t f = 0; f < src.size(); ++f) {
            if (src[f] != int(k)) continue;
            const double x = f == 0 ? v * gs.ratio : v;
            if (!in_domain(traits<GI>::field_domain(f), x))
              fail(k, t, x, "group '" + std::string(layout::group_names[GI]) + "' field " + std::string(traits<GI>::paths::views[f]),
                   to_string(traits<GI>::field_domain(f)));
          }
        });
      }
    }
  }

  void eval_curves(std::int64_t t) {
    [&]<std::size_t... K>(std::index_sequence<K...>) { ((m_values[K] = static_cast<double>(std::get<K>(m_curves)(t))), ...); }(std::make_index_sequence<key_count>{});
  }

  void write_fields(std::int64_t t, E* e) {
    eval_curves(t);
    if (e) {
      [&]<std::size_t... K>(std::index_sequence<K...>) { (write_device<K>(*e), ...); }(std::make_index_sequence<key_count>{});
    }
    for_each_group([&]<std::size_t GI>(auto& gs) {
      constexpr auto src = sources_of<GI>();
      for (std::size_t f = 0; f < src.size(); ++f)
        gs.values[f] = src[f] < 0 ? gs.static_values[f] : (f == 0 ? m_values[std::size_t(src[f])] * gs.ratio : m_values[std::size_t(src[f])]);
    });
  }
  template <std::size_t K>
  void write_device(E& e) {
    if constexpr (resolutions[K].status == detail::key_status::device) {
      using D = typename detail::experiment_field<E, std::size_t(resolutions[K].field_index)>::type;
      D::get(e).set(static_cast<typename D::type::value_type>(m_values[K]));
    }
  }

  // ---- the update of one group: one pass over its span --------------------------------------------
  // Block by block (each stays in L1): u = g*scale; the rule turns u into the direction; then
  // w <- w*(1 - eta*lambda) + eta*lambda*anchor on decayed runs, and w <- w - eta*u.
  template <std::size_t GI>
  void update_group(float scale) {
    using T = traits<GI>;
    using R = typename T::rule_type;
    auto& gs = std::get<GI>(m_groups);
    group_span const& span = store_type::groups[GI];
    if (span.size == 0) return;
    const typename R::consts k = gs.rule.prepare(gs.values.data() + 2, m_step);
    const float eta = float(gs.values[0]);
    const float c = float(gs.values[0] * gs.values[1]);
    float* w = m_store->values() + span.offset;
    float const* g = m_store->grads() + span.offset;
    float const* a = gs.anchor.get();
    for (auto const& r : gs.runs) {
      if (r.decay) run_blocks<R, true, T::has_anchor>(gs, k, w, g, a, r.begin, r.end, scale, eta, c);
      else run_blocks<R, false, T::has_anchor>(gs, k, w, g, a, r.begin, r.end, scale, eta, c);
    }
    ++m_chain_calls;
  }
  // Every rule is elementwise, so the blocks are independent: a run longer than one piece (8 blocks)
  // is cut into pieces, shared out over the backend's threads (for_each_share: each thread the same
  // stretch of the buffers every step, so it stays in that core's cache). The blocks start where a
  // single thread's would, so the result does not depend on the thread count.
  static constexpr std::int64_t piece_size = 8 * block_size;
  template <class R, bool Decay, bool Anchor, class GS>
  static void run_blocks(GS& gs, typename R::consts const& k, float* w, float const* g, float const* a, std::int64_t begin,
                         std::int64_t end, float scale, float eta, float c) {
    const rule_math::weight_consts wk = rule_math::decay_of(eta, c);
    auto run_piece = [&](std::int64_t from, std::int64_t to) {
      alignas(64) float u[block_size];
      alignas(64) float scratch[block_size];
      constexpr std::size_t S = R::states::size;
      std::array<float*, S + 1> st{};
      for (std::int64_t i = from; i < to; i += block_size) {
        const std::int64_t n = to - i < block_size ? to - i : block_size;
        for (std::size_t s = 0; s < S; ++s) st[s] = gs.states[s].get() + i;
        auto U = detail::arr(u, n);
        U = detail::arr(g + i, n) * scale;
        apply_rule<R, Decay, Anchor>(k, block{u, w + i, Anchor ? a + i : nullptr, st.data(), scratch, n});
        auto W = detail::arr(w + i, n);
        if constexpr (Anchor) rule_math::weight_step<Decay, true>(W, U, detail::arr(a + i, n), wk);
        else rule_math::weight_step<Decay, false>(W, U, 0.0f, wk);
      }
    };
    const std::int64_t pieces = (end - begin + piece_size - 1) / piece_size;
    if (pieces <= 1) return run_piece(begin, end);
    nitro::detail::active_ops().for_each_share(pieces, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) run_piece(begin + p * piece_size, std::min(begin + (p + 1) * piece_size, end));
    });
  }

  void describe_keys(std::string& s) const {
    [&]<std::size_t... K>(std::index_sequence<K...>) { (describe_key<K>(s), ...); }(std::make_index_sequence<key_count>{});
  }
  template <std::size_t K>
  void describe_key(std::string& s) const {
    s += "    " + std::string(keys::names[K]) + " = " + m_key_texts[K] + "  ->  " + binds_to<K>() + "\n";
  }
  template <std::size_t K>
  std::string binds_to() const {
    constexpr auto r = resolutions[K];
    if constexpr (r.status == detail::key_status::device) {
      std::string line = "device: ";
      line += r.field;
      return line += " (written each step)";
    } else {
      std::string line = r.status == detail::key_status::opt_group ? "opt, path-bound: " : "opt: ";
      bool first = true;
      for_each_group([&]<std::size_t GI>(auto const& gs) {
        constexpr auto src = sources_of<GI>();
        for (std::size_t f = 0; f < src.size(); ++f) {
          if (src[f] != int(K)) continue;
          line += (first ? "" : ", ") + std::string(layout::group_names[GI]) + "." + std::string(traits<GI>::paths::views[f]);
          if (f == 0) line += " (x" + detail::format_number(gs.ratio) + ")";
          first = false;
        }
      });
      if (first) line += "(overridden by path keys in every group)";
      return line;
    }
  }
  template <std::size_t K>
  void landings_of(std::vector<schedule_landing>& out) const {
    constexpr auto r = resolutions[K];
    if constexpr (r.status == detail::key_status::device) {
      out.push_back({std::string(keys::names[K]), std::string(), "device." + std::string(r.field)});
    } else {
      for_each_group([&]<std::size_t GI>(auto const&) {
        constexpr auto src = sources_of<GI>();
        for (std::size_t f = 0; f < src.size(); ++f)
          if (src[f] == int(K))
            out.push_back({std::string(keys::names[K]), std::string(layout::group_names[GI]), std::string(traits<GI>::paths::views[f])});
      });
    }
  }

 public:
  // The schedule keys as show() lists them, and where each value lands.
  std::vector<schedule_info> schedule_infos() const {
    std::vector<schedule_info> out;
    [&]<std::size_t... K>(std::index_sequence<K...>) { (out.push_back({std::string(keys::names[K]), binds_to<K>(), m_key_texts[K]}), ...); }(
        std::make_index_sequence<key_count>{});
    return out;
  }
  std::vector<schedule_landing> landings() const {
    std::vector<schedule_landing> out;
    [&]<std::size_t... K>(std::index_sequence<K...>) { (landings_of<K>(out), ...); }(std::make_index_sequence<key_count>{});
    return out;
  }
  // The schedule keys as written, and each one's value for the current step (what begin_step
  // wrote): the values autolog_schedules logs. No allocation.
  static constexpr std::size_t schedule_count = key_count;
  static constexpr std::string_view schedule_key(std::size_t k) noexcept { return k < key_count ? keys::names[k] : std::string_view{}; }
  double schedule_value(std::size_t k) const noexcept { return k < key_count ? m_values[k] : 0.0; }

  // One line naming the rules: "adamw(...)" when every group runs the same, else "encoder: ...; head: ...".
  std::string rule_summary() const {
    auto infos = group_infos();
    bool same = true;
    for (auto const& g : infos) same = same && g.rule == infos.front().rule;
    if (infos.empty()) return "none (no trainable parameters)";
    if (same) return infos.front().rule;
    std::string s;
    for (auto const& g : infos) s += (s.empty() ? "" : "; ") + g.name + ": " + g.rule;
    return s;
  }

 private:
  store_type* m_store;
  program_options m_options;
  typename keys::curves m_curves;
  group_states m_groups;
  std::array<double, key_count + 1> m_values{};
  std::array<std::string, key_count + 1> m_key_texts{};
  std::array<bool, store_type::leaves.size() + 1> m_no_decay{}, m_no_perturb{}, m_adaptive{};
  std::unique_ptr<float[], nitro::detail::free_deleter> m_sam_grads, m_backup;
  double m_base_rate = 1e-3;
  double m_last_norm = 0, m_last_sam_norm = 0;
  std::int64_t m_step = 0;
  std::int64_t m_chain_calls = 0;
};

}  // namespace nitro::optim
