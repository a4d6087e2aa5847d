// nitro/dist/metrics.hpp — a split's metrics over every rank's shard, by the pair rules.
//
//   nitro::dist::metric_totals<Metrics> t;          // Metrics: what the metrics hook returns
//   for each batch of this rank's shard (split_shard):
//     t.add_mean("loss", nitro::mean_of(loss, 1));  // named means beside the struct (the loss)
//     t.add(call_hook<hook::metrics>(...));         // one batch's reducers
//   nitro::metric_values v = t.reduce(replicas);    // the same values on every rank
//
// The rules are the metrics hook's (nn/metrics.hpp), applied across ranks:
//   nitro::mean_of{x, n}   `x => n`: x summed and n summed over every rank, then divided
//   nitro::sum_of{x}       `=> :sum`: summed over every rank (numbers and tensors), never divided
//   nitro::concat_of{x}    `=> :concat`: gathered in rank order; with split_shard's contiguous
//                          blocks that is the split in order, as one process concatenates it
// The result is built by a metric_accumulator fed the combined reducers, so names, shapes and the
// tensor/scalar split are exactly what one process reports; `batches` counts every rank's batches.
// Every rank receives the same values, so early stopping, restore_best and the checkpointer's
// monitor decide the same on every rank. Collectives: one maximum (the ranks agree on the layout),
// one sum of doubles, one gather of the concatenations (none without concat_of members). A rank's
// values in a device's memory are read back as each batch is added: its totals are host doubles.
//
// Needs no MPI header. E-DIST-008 when the ranks' metrics differ in layout.
#pragma once

#include "nitro/bind/kwargs.hpp"
#include "nitro/core/error.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/tensor/tensor.hpp"
#include "nitro/nn/metrics.hpp"

#include <boost/hana/string.hpp>

#include <cstdint>      // int64_t
#include <cstring>      // memcpy
#include <string>       // names
#include <string_view>  // lookups
#include <type_traits>  // traits
#include <utility>      // index_sequence
#include <vector>       // sums, concatenations

namespace nitro::dist {

namespace detail {

// What metric_totals keeps that does not depend on the metrics struct: the slots, the named means
// and the collectives that combine every rank's slots (compiled once in nitro::runtime).
class metric_slots {
 public:
  // A named mean beside the struct ("loss": the mean over batches, counted once per batch).
  NITRO_RUNTIME_INLINE void add_mean(std::string_view name, mean_of const& v);
  // Batches this rank added (the most any reducer saw, as metric_accumulator counts them).
  NITRO_RUNTIME_INLINE std::int64_t batches() const noexcept;

 protected:
  struct slot {
    std::string name;
    nitro::detail::reducer_kind kind = nitro::detail::reducer_kind::mean;
    bool seen = false;
    bool is_tensor = false;
    std::int64_t adds = 0;       // named means: batches added
    std::vector<double> sums;    // mean: {sum, count}; sum: the number, or the tensor's elements
    nitro::shape shape{};        // a summed tensor's shape, or one sample's (concat)
    std::int64_t features = 0;   // concat: values per sample
    std::vector<float> cat;      // concat: this rank's samples, batch last
  };
  // Every rank's slots combined: per slot its summed numbers and its concatenation in rank order.
  struct totals {
    std::vector<std::vector<double>> sums;
    std::vector<std::vector<float>> cats;
    std::int64_t batches = 0;
  };

  // The ranks agree on the layout (E-DIST-008), sum every number and gather the concatenations.
  NITRO_RUNTIME_INLINE totals combine(replicas& r) const;
  // The named means of the combined totals, into the accumulator that reports them.
  NITRO_RUNTIME_INLINE void add_named(metric_accumulator& acc, totals const& t) const;
  NITRO_RUNTIME_INLINE void new_slot(std::string name, nitro::detail::reducer_kind kind);
  NITRO_RUNTIME_INLINE void add_member(std::size_t at, mean_of const& v);

  std::vector<slot> m_slots;    // named means first, then the struct's slots from m_first
  std::size_t m_named = 0;
  std::size_t m_first = 0;
  bool m_laid_out = false;
  std::int64_t m_batches = 0;
};

}  // namespace detail

template <class M = void>
class metric_totals : public detail::metric_slots {
 public:
  // One batch of the metrics hook's reducers.
  template <class X>
  void add(X const& m) {
    static_assert(std::is_same_v<X, M>, "E-METRIC-010: nitro::dist::metric_totals<M>::add takes the metrics struct M it was declared for. Fix: add the struct the metrics hook returns.");
    static_assert(checks_evaluated<nitro::detail::check_metrics_struct<M>()>);
    if (!m_laid_out) layout();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (add_member(m_first + nitro::detail::slot_offset<M, I>, nitro::detail::accessor_at<M, I>{}(m)), ...);
    }(std::make_index_sequence<nitro::detail::member_count<M>>{});
    ++m_batches;
  }

  // Every rank's totals combined; every rank receives the same values.
  metric_values reduce(replicas& r, residency where = residency::device) const {
    const totals t = combine(r);
    // the combined reducers, reported as one process reports them
    metric_accumulator acc(where);
    add_named(acc, t);
    if constexpr (!std::is_void_v<M>) {
      if (m_laid_out) acc.add(combined(t.sums, t.cats));
    }
    metric_values out = acc.result();
    out.batches = t.batches;
    return out;
  }

 private:
  using detail::metric_slots::add_member;

  void layout() {
    m_laid_out = true;
    m_first = m_named;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (add_slots<nitro::detail::member_t<M, I>>(boost::hana::to<char const*>(nitro::detail::key_at<M, I>{})), ...);
    }(std::make_index_sequence<nitro::detail::member_count<M>>{});
  }
  template <class T>
  void add_slots(std::string name) {
    using R = nitro::detail::reducer_traits<T>;
    if constexpr (R::kind == nitro::detail::reducer_kind::concat) {
      if constexpr (R::is_struct) {
        using V = decltype(T{}.value);
        [&]<std::size_t... J>(std::index_sequence<J...>) {
          (new_slot(name + "." + boost::hana::to<char const*>(nitro::detail::key_at<V, J>{}), R::kind), ...);
        }(std::make_index_sequence<nitro::detail::member_count<V>>{});
      } else {
        new_slot(std::move(name), R::kind);
      }
    } else {
      new_slot(std::move(name), R::kind);
    }
  }
  template <class V>
  void add_member(std::size_t at, sum_of<V> const& v) {
    slot& s = m_slots[at];
    if constexpr (std::is_arithmetic_v<V>) {
      if (s.sums.empty()) s.sums.assign(1, 0.0);
      s.sums[0] += static_cast<double>(v.value);
    } else {
      auto const& x = v.value;
      if (!s.seen) {
        s.is_tensor = true;
        s.shape = x.shape();
        s.sums.assign(static_cast<std::size_t>(x.numel()), 0.0);
      } else if (!(s.shape == x.shape())) {
        nitro::detail::summed_metric_changed_shape(s.name, s.shape, x.shape());
      }
      const auto h = x.to_vector();  // a tensor on a device is read back here
      for (std::size_t i = 0; i < h.size(); ++i) s.sums[i] += static_cast<double>(h[i]);
    }
    s.seen = true;
  }
  template <class V>
  void add_member(std::size_t at, concat_of<V> const& v) {
    if constexpr (is_tensor_v<V>) {
      append(m_slots[at], v.value);
    } else {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        (append(m_slots[at + J], nitro::detail::accessor_at<V, J>{}(v.value)), ...);
      }(std::make_index_sequence<nitro::detail::member_count<V>>{});
    }
  }
  template <class T>
  void append(slot& s, basic_tensor<T> const& x) {
    const std::int64_t n = x.rank() == 0 ? 1 : x.batch();
    const std::int64_t f = x.rank() <= 1 ? 1 : x.features();
    const nitro::shape one = x.rank() == 0 ? nitro::shape{1} : x.shape().with_last(1);
    if (!s.seen) {
      s.shape = one;
      s.features = f;
    } else if (!(s.shape == one)) {
      nitro::detail::concat_metric_changed_shape(s.name, s.shape, one);
    }
    const auto h = x.to_vector();  // a tensor on a device is read back here
    for (std::int64_t i = 0; i < f * n; ++i) s.cat.push_back(static_cast<float>(h[static_cast<std::size_t>(i)]));
    s.seen = true;
  }

  template <class T> static constexpr bool is_tensor_v = nitro::detail::is_basic_tensor<T>::value;

  // The metrics struct holding every rank's totals (owned tensors).
  M combined(std::vector<std::vector<double>> const& sums, std::vector<std::vector<float>> const& cats) const {
    M m{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (fill(nitro::detail::accessor_at<M, I>{}(m), m_first + nitro::detail::slot_offset<M, I>, sums, cats), ...);
    }(std::make_index_sequence<nitro::detail::member_count<M>>{});
    return m;
  }
  void fill(mean_of& out, std::size_t at, std::vector<std::vector<double>> const& sums, std::vector<std::vector<float>> const&) const {
    out = mean_of(sums[at][0], sums[at][1]);
  }
  template <class V>
  void fill(sum_of<V>& out, std::size_t at, std::vector<std::vector<double>> const& sums, std::vector<std::vector<float>> const&) const {
    if constexpr (std::is_arithmetic_v<V>) {
      out.value = static_cast<V>(sums[at].empty() ? 0.0 : sums[at][0]);
    } else {
      V t = V::owned(m_slots[at].shape);
      for (std::size_t i = 0; i < sums[at].size(); ++i) t[static_cast<std::int64_t>(i)] = static_cast<typename V::scalar>(sums[at][i]);
      out.value = t;
    }
  }
  template <class V>
  void fill(concat_of<V>& out, std::size_t at, std::vector<std::vector<double>> const&, std::vector<std::vector<float>> const& cats) const {
    if constexpr (is_tensor_v<V>) {
      out.value = concatenated<V>(at, cats);
    } else {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((nitro::detail::accessor_at<V, J>{}(out.value) =
              concatenated<std::remove_cvref_t<decltype(nitro::detail::accessor_at<V, J>{}(out.value))>>(at + J, cats)),
         ...);
      }(std::make_index_sequence<nitro::detail::member_count<V>>{});
    }
  }
  template <class V>
  V concatenated(std::size_t at, std::vector<std::vector<float>> const& cats) const {
    slot const& s = m_slots[at];
    const std::int64_t f = s.features > 0 ? s.features : 1;
    const std::int64_t samples = static_cast<std::int64_t>(cats[at].size()) / f;
    V t = V::owned(s.shape.with_last(samples));
    for (std::size_t i = 0; i < cats[at].size(); ++i) t[static_cast<std::int64_t>(i)] = static_cast<typename V::scalar>(cats[at][i]);
    return t;
  }
};

}  // namespace nitro::dist

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::dist::detail {

NITRO_RUNTIME_INLINE void metric_slots::add_mean(std::string_view name, mean_of const& v) {
  slot* s = nullptr;
  for (std::size_t i = 0; i < m_named; ++i)
    if (m_slots[i].name == name) s = &m_slots[i];
  if (!s) {
    m_slots.insert(m_slots.begin() + static_cast<std::ptrdiff_t>(m_named), slot{});
    s = &m_slots[m_named++];
    ++m_first;
    s->name = std::string(name);
    s->kind = nitro::detail::reducer_kind::mean;
    s->sums.assign(2, 0.0);
  }
  s->sums[0] += v.host_sum();  // a sum left on a device is read back here
  s->sums[1] += v.count;
  s->seen = true;
  ++s->adds;
}

NITRO_RUNTIME_INLINE std::int64_t metric_slots::batches() const noexcept {
  std::int64_t n = m_batches;
  for (std::size_t i = 0; i < m_named; ++i) n = m_slots[i].adds > n ? m_slots[i].adds : n;
  return n;
}

NITRO_RUNTIME_INLINE metric_slots::totals metric_slots::combine(replicas& r) const {
  // 1. the ranks agree on the layout: names, kinds and sizes
  std::string sig;
  std::int64_t doubles = 1;  // the batch count
  for (auto const& s : m_slots) {
    sig += s.name + ':' + char('0' + int(s.kind)) + ':' + std::to_string(s.sums.size()) + ':' + std::to_string(s.features) + ';';
    doubles += static_cast<std::int64_t>(s.sums.size());
  }
  const std::int64_t mine = checksum(sig.data(), sig.size());
  if (!spread_of(r, mine, "the layout of the metrics").same())
    throw error("E-DIST-008",
                "the ranks' metrics differ in their names, kinds or shapes (this rank, " + std::to_string(r.rank()) + ", has " +
                    (sig.empty() ? std::string("none: its shard had no batch") : sig) + ")",
                "give every rank a non-empty shard of the split (nitro::dist::split_shard) and return the same metrics struct, "
                "with tensors of one shape, from every batch");
  // 2. one sum of every number
  std::vector<double> packed;
  packed.reserve(static_cast<std::size_t>(doubles));
  packed.push_back(static_cast<double>(batches()));
  for (auto const& s : m_slots) packed.insert(packed.end(), s.sums.begin(), s.sums.end());
  r.sum(packed.data(), static_cast<std::int64_t>(packed.size()), "the sum of the metrics");
  // 3. the concatenations gathered in rank order
  totals t;
  t.cats.resize(m_slots.size());
  bool any_cat = false;
  for (auto const& s : m_slots) any_cat = any_cat || s.kind == nitro::detail::reducer_kind::concat;
  if (any_cat) {
    std::vector<char> bytes;
    for (auto const& s : m_slots) {
      if (s.kind != nitro::detail::reducer_kind::concat) continue;
      const std::int64_t n = static_cast<std::int64_t>(s.cat.size());
      bytes.insert(bytes.end(), reinterpret_cast<char const*>(&n), reinterpret_cast<char const*>(&n) + sizeof n);
      bytes.insert(bytes.end(), reinterpret_cast<char const*>(s.cat.data()), reinterpret_cast<char const*>(s.cat.data() + s.cat.size()));
    }
    std::vector<char> all;
    std::vector<std::size_t> sizes;
    r.gather(bytes.data(), bytes.size(), all, sizes, "the gather of the concatenated metrics");
    std::size_t at = 0;
    for (std::size_t rank = 0; rank < sizes.size(); ++rank) {
      for (std::size_t i = 0; i < m_slots.size(); ++i) {
        if (m_slots[i].kind != nitro::detail::reducer_kind::concat) continue;
        std::int64_t n = 0;
        std::memcpy(&n, all.data() + at, sizeof n);
        at += sizeof n;
        const std::size_t old = t.cats[i].size();
        t.cats[i].resize(old + static_cast<std::size_t>(n));
        if (n > 0) std::memcpy(t.cats[i].data() + old, all.data() + at, sizeof(float) * static_cast<std::size_t>(n));
        at += sizeof(float) * static_cast<std::size_t>(n);
      }
    }
  }
  // each slot's share of the summed numbers
  std::size_t p = 1;
  t.sums.resize(m_slots.size());
  for (std::size_t i = 0; i < m_slots.size(); ++i) {
    t.sums[i].assign(packed.begin() + static_cast<std::ptrdiff_t>(p), packed.begin() + static_cast<std::ptrdiff_t>(p + m_slots[i].sums.size()));
    p += m_slots[i].sums.size();
  }
  t.batches = static_cast<std::int64_t>(packed[0]);
  return t;
}

NITRO_RUNTIME_INLINE void metric_slots::add_named(metric_accumulator& acc, totals const& t) const {
  for (std::size_t i = 0; i < m_named; ++i) acc.add_mean(m_slots[i].name, mean_of(t.sums[i][0], t.sums[i][1]));
}

NITRO_RUNTIME_INLINE void metric_slots::new_slot(std::string name, nitro::detail::reducer_kind kind) {
  slot s;
  s.name = std::move(name);
  s.kind = kind;
  if (kind == nitro::detail::reducer_kind::mean) s.sums.assign(2, 0.0);
  m_slots.push_back(std::move(s));
}

NITRO_RUNTIME_INLINE void metric_slots::add_member(std::size_t at, mean_of const& v) {
  slot& s = m_slots[at];
  s.sums[0] += v.host_sum();
  s.sums[1] += v.count;
  s.seen = true;
}

}  // namespace nitro::dist::detail
#endif  // !NITRO_RUNTIME_EXTERN
