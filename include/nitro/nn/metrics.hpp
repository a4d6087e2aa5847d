// nitro/nn/metrics.hpp — what the metrics hook returns, and how a split's metrics add up.
//
// metrics(outputs, in) returns a Boost.Hana struct whose members are reducers (the note's pairs):
//   nitro::mean_of{correct, n}   `correct => n`: summed over the split, then divided by the summed
//                                count (a per-sample mean, whatever the batch sizes)
//   nitro::sum_of{x}             `=> :sum`: summed over the split, never divided; x a number or a
//                                tensor (a confusion matrix: the split's matrix)
//   nitro::concat_of{x}          `=> :concat`: every sample of the split, aligned, batch last; x a
//                                tensor, or a Hana struct of tensors sharing the batch extent
//                                (reported as "name.member")
//
//   struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, confusion)); };
//   auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
//     return Metrics{{nitro::nn::correct_count(logits, in.label), double(in.label.batch())}, {confusion(logits, in.label)}};
//   }
//
// finalize_metrics(acc, split) (optional hook) sees the reduced values — acc.at("acc") is a mean,
// acc.tensor("confusion") the split's matrix — and returns them (or edits them in place).
// metrics_residency(hook) (optional hook, called with nitro::hook::metrics{} or
// nitro::hook::finalize_metrics{}) says where that hook's reducers live: nitro::residency::device
// (the default for metrics: batches accumulate where they were computed, one read-back per split)
// or nitro::residency::host (the default for finalize_metrics: each batch's values cross to the
// host). The choice is recorded in the result (accumulated_on, finalized_on). This accumulator's
// slots are host memory, as the CPU backend's device memory is: there, neither choice copies
// anything, and show() says so.
// With no metrics hook the loss is the metric, with a count of 1 per batch (`eval_loss` also adds
// the loss beside the metrics when both exist).
//
// metric_accumulator lays out one slot per reducer at the first batch, by the metrics struct's
// compile-time member positions; later batches write into those slots and allocate nothing
// (reserve_samples(split size) sizes concatenations up front).
//
// The reducers and metric_values are nn/reducers.hpp; this header is the accumulator and the hooks
// around it.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/nn/reducers.hpp"

#include "nitro/bind/binding.hpp"
#include "nitro/bind/kwargs.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/tensor/tensor.hpp"
#include "nitro/core/cache_stats.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/string.hpp>

#include <cstdint>      // int64_t
#include <cstring>      // memcpy
#include <map>          // results by name
#include <string>       // names
#include <string_view>  // lookups
#include <type_traits>  // traits
#include <utility>      // index_sequence
#include <vector>       // slots, buffers

namespace nitro {

// ---- the accumulator ------------------------------------------------------------------------------

namespace detail {  // its errors, made once (nitro::runtime) for every metrics struct
[[noreturn]] NITRO_RUNTIME_INLINE void summed_metric_changed_shape(std::string const& name, shape const& from, shape const& to);
[[noreturn]] NITRO_RUNTIME_INLINE void concat_metric_changed_shape(std::string const& name, shape const& from, shape const& to);
[[noreturn]] NITRO_RUNTIME_INLINE void concat_members_disagree(std::string const& name, std::int64_t n, std::int64_t samples);
}  // namespace detail

class metric_accumulator {
 public:
  metric_accumulator() = default;
  explicit metric_accumulator(residency where) { set_residency(where); }

  // Where the reducers accumulate (metrics_residency). A GraphConst is not a place: E-METRIC-005.
  void set_residency(residency where);
  residency where() const noexcept { return m_where; }

  // Room for `n` samples in every concatenation, so a whole split concatenates without growing.
  void reserve_samples(std::int64_t n) { m_reserve = n > 0 ? n : 0; for (auto& s : m_slots) reserve_slot(s); }

  // A new split: clears the sums, keeps the layout and the buffers.
  void clear() noexcept;

  // One batch of the metrics hook's result.
  template <class M>
  void add(M const& m) {
    static_assert(checks_evaluated<detail::check_metrics_struct<M>()>);
    if (m_type != &detail::type_tag<M>::id) layout<M>();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (add_member(m_slots_base + detail::slot_offset<M, I>, detail::accessor_at<M, I>{}(m)), ...);
    }(std::make_index_sequence<detail::member_count<M>>{});
    if (m_slots_base < m_slots.size()) note_add(m_slots[m_slots_base]);
  }

  // The loss of one batch, counted once ("loss": the mean over batches).
  void add_loss(double loss) { add_mean("loss", mean_of(loss, 1.0)); }
  void add_mean(std::string_view name, mean_of const& v);

  // The reduced values; under device residency this is the split's one read-back.
  metric_values result() const;

  std::int64_t batches() const noexcept { return m_batches; }
  std::size_t slot_count() const noexcept { return m_slots.size(); }

 private:
  struct slot {
    std::string name;
    detail::reducer_kind kind = detail::reducer_kind::mean;
    bool seen = false;
    double sum = 0, count = 0;          // mean; numeric sum
    std::int64_t adds = 0;              // batches this slot has seen since clear()
    bool is_tensor = false;             // sum of tensors
    nitro::shape shape{};               // summed tensor's shape, or one sample's shape (concat)
    std::vector<double> tensor_sum;
    std::vector<float> cat;             // concatenated samples, column-major, batch last
    std::int64_t cat_features = 0, cat_samples = 0;
  };

  static cache_counter& buffers_cache();

  // Batches are counted per slot (the loss and the metrics struct each see every batch once).
  void note_add(slot& s) noexcept {
    if (++s.adds > m_batches) m_batches = s.adds;
  }

  template <class M>
  void layout() {
    if (m_type != nullptr)
      throw error("E-METRIC-006", "one metric accumulator received two different metrics struct types",
                  "use one accumulator per metrics hook");
    m_type = &detail::type_tag<M>::id;
    m_slots_base = m_slots.size();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (add_slots<detail::member_t<M, I>>(boost::hana::to<char const*>(detail::key_at<M, I>{})), ...);
    }(std::make_index_sequence<detail::member_count<M>>{});
  }
  template <class T>
  void add_slots(std::string name) {
    using R = detail::reducer_traits<T>;
    if constexpr (R::kind == detail::reducer_kind::concat) {
      if constexpr (R::is_struct) {
        using V = decltype(T{}.value);
        [&]<std::size_t... J>(std::index_sequence<J...>) {
          (new_slot(name + "." + boost::hana::to<char const*>(detail::key_at<V, J>{}), R::kind), ...);
        }(std::make_index_sequence<detail::member_count<V>>{});
      } else {
        new_slot(std::move(name), R::kind);
      }
    } else {
      new_slot(std::move(name), R::kind);
    }
  }
  slot& new_slot(std::string name, detail::reducer_kind kind);
  slot& named_slot(std::string_view name, detail::reducer_kind kind);
  void reserve_slot(slot& s);

  void add_member(std::size_t at, mean_of const& v);
  template <class V>
  void add_member(std::size_t at, sum_of<V> const& v) {
    slot& s = m_slots[at];
    if constexpr (std::is_arithmetic_v<V>) {
      s.sum += static_cast<double>(v.value);
    } else {
      auto const& x = v.value;
      if (!s.seen) {
        s.is_tensor = true;
        if (s.tensor_sum.size() != static_cast<std::size_t>(x.numel()) || !(s.shape == x.shape())) {
          if (s.tensor_sum.capacity() < static_cast<std::size_t>(x.numel())) buffers_cache().miss(); else buffers_cache().hit();
          s.tensor_sum.assign(static_cast<std::size_t>(x.numel()), 0.0);
        } else {
          buffers_cache().hit();
        }
        s.shape = x.shape();
      } else if (!(s.shape == x.shape())) {
        detail::summed_metric_changed_shape(s.name, s.shape, x.shape());
      }
      for (std::int64_t i = 0; i < x.numel(); ++i) s.tensor_sum[static_cast<std::size_t>(i)] += static_cast<double>(x[i]);
    }
    s.seen = true;
  }
  template <class V>
  void add_member(std::size_t at, concat_of<V> const& v) {
    if constexpr (detail::is_basic_tensor<V>::value) {
      append(m_slots[at], v.value, v.value.rank() == 0 ? 1 : v.value.batch());
    } else {
      const std::int64_t n = batch_of(detail::accessor_at<V, 0>{}(v.value));
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        (append(m_slots[at + J], detail::accessor_at<V, J>{}(v.value), n), ...);
      }(std::make_index_sequence<detail::member_count<V>>{});
    }
  }
  template <class T>
  static std::int64_t batch_of(basic_tensor<T> const& x) noexcept { return x.rank() == 0 ? 1 : x.batch(); }

  template <class T>
  void append(slot& s, basic_tensor<T> const& x, std::int64_t samples) {
    const std::int64_t n = batch_of(x);
    if (n != samples) detail::concat_members_disagree(s.name, n, samples);
    const std::int64_t f = x.rank() <= 1 ? 1 : x.features();
    const nitro::shape one = x.rank() == 0 ? nitro::shape{1} : x.shape().with_last(1);
    if (!s.seen) {
      if (s.cat_features != f) s.cat.clear();
      s.cat_features = f;
      s.shape = one;
      reserve_slot(s);
    } else if (!(s.shape == one)) {
      detail::concat_metric_changed_shape(s.name, s.shape, one);
    }
    const std::size_t need = s.cat.size() + static_cast<std::size_t>(f * n);
    if (need > s.cat.capacity()) buffers_cache().miss(); else buffers_cache().hit();
    const std::size_t at = s.cat.size();
    s.cat.resize(need);
    for (std::int64_t i = 0; i < f * n; ++i) s.cat[at + static_cast<std::size_t>(i)] = static_cast<float>(x[i]);
    s.cat_samples += n;
    s.seen = true;
  }

  std::vector<slot> m_slots;
  std::size_t m_slots_base = 0;
  char const* m_type = nullptr;
  residency m_where = residency::device;
  std::int64_t m_reserve = 0;
  std::int64_t m_batches = 0;
};

// ---- the hooks around the accumulator --------------------------------------------------------------

// Where hook H's reducers live: the experiment's metrics_residency(H{}) when it has one, else
// device for metrics and host for finalize_metrics.
template <class Hook, class E>
residency metrics_residency_of(E const& e) {
  if constexpr (requires { e.metrics_residency(Hook{}); }) {
    using R = decltype(e.metrics_residency(Hook{}));
    if constexpr (std::is_convertible_v<R, residency>) {
      residency r = e.metrics_residency(Hook{});
      if (r == residency::graph_const)
        throw error("E-METRIC-005", std::string("metrics_residency(") + std::string(Hook::name) + ") returned GraphConst",
                    "return nitro::residency::device or nitro::residency::host");
      return r;
    } else {
      (void)metrics_residency_has_wrong_type<Hook, returns<R>>::ok;
      return residency::device;
    }
  } else {
    return std::is_same_v<Hook, hook::finalize_metrics> ? residency::host : residency::device;
  }
}

// Applies the experiment's finalize_metrics(acc, split), when it has one.
template <class E>
metric_values finalize_metrics(E const& e, metric_values acc, std::string_view split) {
  acc.finalized_on = metrics_residency_of<hook::finalize_metrics>(e);
  if constexpr (hook::finalize_metrics::present<E>) {
    if constexpr (requires { e.finalize_metrics(acc, split); }) {
      using R = decltype(e.finalize_metrics(acc, split));
      if constexpr (std::is_void_v<R>) {
        e.finalize_metrics(acc, split);
        return acc;
      } else if constexpr (std::is_convertible_v<R, metric_values>) {
        const residency acc_on = acc.accumulated_on, fin_on = acc.finalized_on;
        const std::int64_t batches = acc.batches;
        metric_values out = e.finalize_metrics(acc, split);
        out.accumulated_on = acc_on;
        out.finalized_on = fin_on;
        out.batches = batches;
        return out;
      } else {
        (void)finalize_metrics_has_wrong_signature<hook::finalize_metrics, returns<R>>::ok;
        return acc;
      }
    } else {
      (void)finalize_metrics_has_wrong_signature<hook::finalize_metrics, E>::ok;
      return acc;
    }
  } else {
    return acc;
  }
}

// Does evaluation report the loss? Always without a metrics hook (the loss is the metric);
// with one, when the eval_loss keyword says so.
constexpr bool evaluation_reports_loss(bool has_loss, bool has_metrics, bool eval_loss) noexcept {
  return has_loss && (eval_loss || !has_metrics);
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void detail::summed_metric_changed_shape(std::string const& name, shape const& from, shape const& to) {
  throw error("E-METRIC-002", "the summed metric '" + name + "' changed shape from " + from.to_string() + " to " + to.to_string(),
              "return tensors of one shape for a nitro::sum_of metric in every batch");
}

NITRO_RUNTIME_INLINE void detail::concat_metric_changed_shape(std::string const& name, shape const& from, shape const& to) {
  throw error("E-METRIC-002",
              "the concatenated metric '" + name + "' changed its per-sample shape from " + from.to_string() + " to " + to.to_string(),
              "return one per-sample shape for a nitro::concat_of metric in every batch");
}

NITRO_RUNTIME_INLINE void detail::concat_members_disagree(std::string const& name, std::int64_t n, std::int64_t samples) {
  throw error("E-METRIC-007",
              "the concatenated metric '" + name + "' has " + std::to_string(n) + " samples in this batch, but its sibling members have " +
                  std::to_string(samples),
              "give every member of a nitro::concat_of struct the batch extent last");
}

NITRO_RUNTIME_INLINE void metric_accumulator::set_residency(residency where) {
  if (where == residency::graph_const)
    throw error("E-METRIC-005", "metrics_residency returned GraphConst, which is not a place to accumulate",
                "return nitro::residency::device or nitro::residency::host");
  m_where = where;
}

NITRO_RUNTIME_INLINE void metric_accumulator::clear() noexcept {
  for (auto& s : m_slots) {
    s.sum = s.count = 0;
    s.adds = 0;
    s.seen = false;
    std::fill(s.tensor_sum.begin(), s.tensor_sum.end(), 0.0);
    s.cat.clear();
    s.cat_samples = 0;
  }
  m_batches = 0;
}

NITRO_RUNTIME_INLINE void metric_accumulator::add_mean(std::string_view name, mean_of const& v) {
  slot& s = named_slot(name, detail::reducer_kind::mean);
  s.sum += v.sum;
  s.count += v.count;
  s.seen = true;
  note_add(s);
}

NITRO_RUNTIME_INLINE metric_values metric_accumulator::result() const {
  metric_values out;
  out.accumulated_on = m_where;
  out.batches = m_batches;
  for (auto const& s : m_slots) {
    if (!s.seen) continue;
    switch (s.kind) {
      case detail::reducer_kind::mean:
        out.scalars[s.name] = s.count != 0 ? s.sum / s.count : 0.0;
        break;
      case detail::reducer_kind::sum:
        if (!s.is_tensor) out.scalars[s.name] = s.sum;
        else if (s.shape.rank() == 0) out.scalars[s.name] = s.tensor_sum.empty() ? 0.0 : s.tensor_sum[0];
        else {
          Tensor t = Tensor::owned(s.shape);
          for (std::size_t i = 0; i < s.tensor_sum.size(); ++i) t[static_cast<std::int64_t>(i)] = static_cast<float>(s.tensor_sum[i]);
          out.tensors[s.name] = t;
        }
        break;
      case detail::reducer_kind::concat: {
        Tensor t = Tensor::owned(s.shape.with_last(s.cat_samples));
        if (!s.cat.empty()) std::memcpy(t.data(), s.cat.data(), sizeof(float) * s.cat.size());
        out.tensors[s.name] = t;
        break;
      }
    }
  }
  return out;
}

NITRO_RUNTIME_INLINE cache_counter& metric_accumulator::buffers_cache() {
  static cache_counter& c = runtime_cache("metrics.accumulator.buffers");
  return c;
}

NITRO_RUNTIME_INLINE void metric_accumulator::reserve_slot(slot& s) {
  if (s.kind == detail::reducer_kind::concat && s.cat_features > 0 && m_reserve > 0)
    s.cat.reserve(static_cast<std::size_t>(s.cat_features * m_reserve));
}

NITRO_RUNTIME_INLINE void metric_accumulator::add_member(std::size_t at, mean_of const& v) {
  slot& s = m_slots[at];
  s.sum += v.sum;
  s.count += v.count;
  s.seen = true;
}

NITRO_RUNTIME_INLINE metric_accumulator::slot& metric_accumulator::new_slot(std::string name, detail::reducer_kind kind) {
  for (auto const& s : m_slots)
    if (s.name == name)
      throw error("E-METRIC-007", "two metrics are called '" + name + "' (the loss is reported as 'loss')",
                  "rename one of them");
  m_slots.push_back({});
  m_slots.back().name = std::move(name);
  m_slots.back().kind = kind;
  return m_slots.back();
}

NITRO_RUNTIME_INLINE metric_accumulator::slot& metric_accumulator::named_slot(std::string_view name, detail::reducer_kind kind) {
  for (auto& s : m_slots)
    if (s.name == name) return s;
  // inserting before the metrics struct's slots would shift them: keep them at the end
  if (m_type != nullptr) {
    m_slots.insert(m_slots.begin() + static_cast<std::ptrdiff_t>(m_slots_base), slot{});
    slot& s = m_slots[m_slots_base++];
    s.name = std::string(name);
    s.kind = kind;
    return s;
  }
  return new_slot(std::string(name), kind);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
