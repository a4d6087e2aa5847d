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
// host). The choice is recorded in the result (accumulated_on, finalized_on), and so are the
// copies it cost (host_crossings). Under device residency a value in a device's memory (a
// mean_of over a one-element tensor, a summed tensor, a concatenation; float) is added or
// appended there, in float, by the step's own kernels (device_ops::copy) into a buffer of the
// slot's, and
// result() gathers every such buffer on the device and reads them back in one copy: one crossing
// per split. Under host residency each such value crosses when its batch is added. Values in host
// memory (every value on the CPU backend, whose device memory is the host's) are added on the
// host, in double, with no copy under either choice.
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
#include "nitro/core/cache_stats.hpp"
#include "nitro/tensor/device_ops.hpp"
#include "nitro/tensor/tape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/string.hpp>

#include <algorithm>    // max, fill
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

namespace detail {
// Elements a device slot reserves for n: whole 64-byte lines.
constexpr std::int64_t metric_room(std::int64_t n) noexcept { return (n + 15) / 16 * 16; }

// the accumulator's errors, made once (nitro::runtime) for every metrics struct
[[noreturn]] NITRO_RUNTIME_INLINE void summed_metric_changed_shape(std::string const& name, shape const& from, shape const& to);
[[noreturn]] NITRO_RUNTIME_INLINE void concat_metric_changed_shape(std::string const& name, shape const& from, shape const& to);
[[noreturn]] NITRO_RUNTIME_INLINE void concat_members_disagree(std::string const& name, std::int64_t n, std::int64_t samples);
}  // namespace detail

class metric_accumulator {
 public:
  metric_accumulator() = default;
  explicit metric_accumulator(residency where) { set_residency(where); }
  metric_accumulator(metric_accumulator const&) = delete;  // it owns its device buffers
  metric_accumulator& operator=(metric_accumulator const&) = delete;
  ~metric_accumulator() { release_device(); }

  // Where the reducers accumulate (metrics_residency). A GraphConst is not a place: E-METRIC-005.
  void set_residency(residency where);
  residency where() const noexcept { return m_where; }

  // Room for `n` samples in every concatenation, so a whole split concatenates without growing.
  void reserve_samples(std::int64_t n) { m_reserve = n > 0 ? n : 0; for (auto& s : m_slots) reserve_slot(s); }

  // A new split: clears the sums, keeps the layout and the buffers (a device buffer is written,
  // not added to, by the split's first batch).
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

  // The reduced values; under device residency this is the split's one read-back (every device
  // slot gathered into one buffer on the device first).
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
    // Device residency: the slot's part on the device, in float, added to (or, for a
    // concatenation, appended after) the host part by result(): a mean's sum, a summed tensor,
    // the concatenated samples.
    float* dev = nullptr;
    std::int64_t dev_capacity = 0, dev_used = 0;  // elements
    bool dev_fresh = true;                        // the split's next device sum writes, not adds
    bool cat_on_device = false;                   // this split's concatenation is in `dev`
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
      if constexpr (std::is_same_v<typename V::scalar, float>) {
        if (x.memory() && device_for(x.memory())) {
          device_sum(s, x.data(), x.numel());
          s.seen = true;
          return;
        }
      }
      if (x.memory()) {  // host residency (or a double tensor): this batch's values cross now
        const auto h = x.to_vector();
        ++m_crossings;
        for (std::size_t i = 0; i < h.size(); ++i) s.tensor_sum[i] += static_cast<double>(h[i]);
      } else {
        for (std::int64_t i = 0; i < x.numel(); ++i) s.tensor_sum[static_cast<std::size_t>(i)] += static_cast<double>(x[i]);
      }
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
    // The split's first batch decides where its concatenation lives: on the device when that
    // batch's values are there (device residency, float), else on the host.
    if (!s.seen) s.cat_on_device = std::is_same_v<T, float> && x.memory() && device_for(x.memory());
    if (s.cat_on_device) {
      if constexpr (std::is_same_v<T, float>) device_append(s, x.data(), f * n, x.memory() == nullptr);
    } else {
      const std::size_t need = s.cat.size() + static_cast<std::size_t>(f * n);
      if (need > s.cat.capacity()) buffers_cache().miss(); else buffers_cache().hit();
      const std::size_t at = s.cat.size();
      s.cat.resize(need);
      if (x.memory()) {  // host residency: this batch's values cross now
        const auto h = x.to_vector();
        ++m_crossings;
        for (std::int64_t i = 0; i < f * n; ++i) s.cat[at + static_cast<std::size_t>(i)] = static_cast<float>(h[static_cast<std::size_t>(i)]);
      } else {
        for (std::int64_t i = 0; i < f * n; ++i) s.cat[at + static_cast<std::size_t>(i)] = static_cast<float>(x[i]);
      }
    }
    s.cat_samples += n;
    s.seen = true;
  }

  // ---- the device part (device residency) ----
  // Whether values in `memory` accumulate there: device residency, inside a step whose kernels
  // compute in that memory (the accumulator keeps that table for the rest of its life).
  bool device_for(device_memory* memory);
  // s.dev (+)= x[0 .. n), on the device (the kernels table's copy).
  void device_sum(slot& s, float const* x, std::int64_t n);
  // x[0 .. n) appended to s.dev, on the device; from host memory when `from_host`.
  void device_append(slot& s, float const* x, std::int64_t n, bool from_host);
  // A mean's sum left on a device: added there, or read back now (host residency).
  void add_device_number(slot& s, device_number const& x);
  void release_device() noexcept;

  std::vector<slot> m_slots;
  std::size_t m_slots_base = 0;
  char const* m_type = nullptr;
  residency m_where = residency::device;
  std::int64_t m_reserve = 0;
  std::int64_t m_batches = 0;
  device_ops* m_ops = nullptr;          // the kernels the device slots are added with
  device_memory* m_memory = nullptr;    // ... and the memory they live in
  mutable std::int64_t m_crossings = 0;  // device-to-host copies since clear()
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
        const std::int64_t batches = acc.batches, crossings = acc.host_crossings;
        metric_values out = e.finalize_metrics(acc, split);
        out.accumulated_on = acc_on;
        out.finalized_on = fin_on;
        out.batches = batches;
        out.host_crossings = crossings;
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
    s.dev_used = 0;
    s.dev_fresh = true;
    s.cat_on_device = false;
  }
  m_batches = 0;
  m_crossings = 0;
}

NITRO_RUNTIME_INLINE void metric_accumulator::add_mean(std::string_view name, mean_of const& v) {
  slot& s = named_slot(name, detail::reducer_kind::mean);
  s.sum += v.sum;
  s.count += v.count;
  if (v.sum_on_device) add_device_number(s, v.sum_on_device);
  s.seen = true;
  note_add(s);
}

NITRO_RUNTIME_INLINE bool metric_accumulator::device_for(device_memory* memory) {
  if (m_where != residency::device || !memory) return false;
  if (!m_ops) {
    step_context* c = current_context();
    if (!c || !c->ops || &c->ops->memory() != memory) return false;  // no kernels computing in that memory
    m_ops = c->ops;
    m_memory = memory;
  }
  return memory == m_memory;
}

NITRO_RUNTIME_INLINE void metric_accumulator::device_sum(slot& s, float const* x, std::int64_t n) {
  if (s.dev_capacity < n) {
    if (s.dev) m_memory->deallocate(s.dev, sizeof(float) * static_cast<std::size_t>(s.dev_capacity));
    s.dev = static_cast<float*>(m_memory->allocate(sizeof(float) * static_cast<std::size_t>(detail::metric_room(n)), 64));
    s.dev_capacity = detail::metric_room(n);
    s.dev_fresh = true;
  }
  m_ops->copy(n, 1, x, n, s.dev, n, !s.dev_fresh);
  s.dev_fresh = false;
  s.dev_used = n;
}

NITRO_RUNTIME_INLINE void metric_accumulator::device_append(slot& s, float const* x, std::int64_t n, bool from_host) {
  const std::int64_t need = s.dev_used + n;
  if (need > s.dev_capacity) {  // grows: room for the reserved samples, else twice the need
    std::int64_t cap = std::max(need, 2 * s.dev_capacity);
    if (s.cat_features > 0 && m_reserve > 0) cap = std::max(cap, s.cat_features * m_reserve);
    cap = detail::metric_room(cap);
    auto* grown = static_cast<float*>(m_memory->allocate(sizeof(float) * static_cast<std::size_t>(cap), 64));
    if (s.dev_used > 0) m_ops->copy(s.dev_used, 1, s.dev, s.dev_used, grown, s.dev_used, false);
    if (s.dev) m_memory->deallocate(s.dev, sizeof(float) * static_cast<std::size_t>(s.dev_capacity));
    buffers_cache().miss();
    s.dev = grown;
    s.dev_capacity = cap;
  } else {
    buffers_cache().hit();
  }
  if (n > 0) {
    if (from_host) m_memory->copy_from_host(s.dev + s.dev_used, x, sizeof(float) * static_cast<std::size_t>(n));
    else m_ops->copy(n, 1, x, n, s.dev + s.dev_used, n, false);
  }
  s.dev_used = need;
}

NITRO_RUNTIME_INLINE void metric_accumulator::add_device_number(slot& s, device_number const& x) {
  if (x.f && device_for(x.memory)) return device_sum(s, x.f, 1);
  s.sum += x.read();  // host residency (or a double): the batch's value crosses now
  ++m_crossings;
}

NITRO_RUNTIME_INLINE void metric_accumulator::release_device() noexcept {
  for (auto& s : m_slots)
    if (s.dev) {
      m_memory->deallocate(s.dev, sizeof(float) * static_cast<std::size_t>(s.dev_capacity));
      s.dev = nullptr;
    }
}

NITRO_RUNTIME_INLINE metric_values metric_accumulator::result() const {
  // The device parts of every slot, gathered on the device and read back in one copy.
  std::vector<float> from_device;
  std::vector<std::int64_t> at(m_slots.size(), -1);
  {
    std::int64_t total = 0;
    slot const* only = nullptr;
    std::size_t parts = 0;
    for (std::size_t i = 0; i < m_slots.size(); ++i) {
      slot const& s = m_slots[i];
      if (!s.seen || !s.dev || s.dev_used == 0 || (s.kind != detail::reducer_kind::concat && s.dev_fresh)) continue;
      if (s.kind == detail::reducer_kind::concat && !s.cat_on_device) continue;
      at[i] = total;
      total += s.dev_used;
      only = &s;
      ++parts;
    }
    if (total > 0) {
      from_device.resize(static_cast<std::size_t>(total));
      const std::size_t bytes = sizeof(float) * from_device.size();
      if (parts == 1) {
        m_memory->copy_to_host(from_device.data(), only->dev, bytes);
      } else {
        auto* gathered = static_cast<float*>(m_memory->allocate(sizeof(float) * static_cast<std::size_t>(detail::metric_room(total)), 64));
        struct give_back {
          device_memory* m;
          float* p;
          std::size_t b;
          ~give_back() { m->deallocate(p, b); }
        } freed{m_memory, gathered, sizeof(float) * static_cast<std::size_t>(detail::metric_room(total))};
        for (std::size_t i = 0; i < m_slots.size(); ++i)
          if (at[i] >= 0) m_ops->copy(m_slots[i].dev_used, 1, m_slots[i].dev, m_slots[i].dev_used, gathered + at[i], m_slots[i].dev_used, false);
        m_memory->copy_to_host(from_device.data(), gathered, bytes);
      }
      ++m_crossings;
    }
  }
  auto device_part = [&](std::size_t i, std::size_t k) -> double {
    return at[i] >= 0 ? static_cast<double>(from_device[static_cast<std::size_t>(at[i]) + k]) : 0.0;
  };

  metric_values out;
  out.accumulated_on = m_where;
  out.batches = m_batches;
  for (std::size_t i = 0; i < m_slots.size(); ++i) {
    slot const& s = m_slots[i];
    if (!s.seen) continue;
    switch (s.kind) {
      case detail::reducer_kind::mean: {
        const double sum = s.sum + device_part(i, 0);
        out.scalars[s.name] = s.count != 0 ? sum / s.count : 0.0;
        break;
      }
      case detail::reducer_kind::sum:
        if (!s.is_tensor) out.scalars[s.name] = s.sum;
        else if (s.shape.rank() == 0) out.scalars[s.name] = (s.tensor_sum.empty() ? 0.0 : s.tensor_sum[0]) + device_part(i, 0);
        else {
          Tensor t = Tensor::owned(s.shape);
          for (std::size_t k = 0; k < s.tensor_sum.size(); ++k)
            t[static_cast<std::int64_t>(k)] = static_cast<float>(s.tensor_sum[k] + device_part(i, k));
          out.tensors[s.name] = t;
        }
        break;
      case detail::reducer_kind::concat: {
        Tensor t = Tensor::owned(s.shape.with_last(s.cat_samples));
        if (at[i] >= 0) std::memcpy(t.data(), from_device.data() + at[i], sizeof(float) * static_cast<std::size_t>(s.dev_used));
        else if (!s.cat.empty()) std::memcpy(t.data(), s.cat.data(), sizeof(float) * s.cat.size());
        out.tensors[s.name] = t;
        break;
      }
    }
  }
  out.host_crossings = m_crossings;
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
  if (v.sum_on_device) add_device_number(s, v.sum_on_device);
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
