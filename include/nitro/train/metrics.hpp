// nitro/train/metrics.hpp — what the metrics hook returns, and how a split's metrics add up.
//
// metrics(e, outputs; label) returns a Boost.Hana struct whose members are reducers:
//   nitro::mean_of{correct, n}   the note's `correct => n`: summed over the split, then divided by the
//                                summed count (per sample, whatever the batch sizes)
//   nitro::sum_of{x}             `=> :sum`: summed over the split, never divided (x a number or tensor)
//   nitro::concat_of{x}          `=> :concat`: every sample of the split, aligned (batch dimension last)
// With no metrics hook, the loss is reported with a count of 1 per batch.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/tensor/tensor.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/string.hpp>

#include <cstdint>      // int64_t
#include <cstring>      // memcpy
#include <map>          // results by name
#include <string>       // names
#include <type_traits>  // traits
#include <vector>       // concatenation

namespace nitro {

struct mean_of {
  double sum = 0;
  double count = 0;
  mean_of() = default;
  mean_of(double s, double n) : sum(s), count(n) {}
  template <class T> mean_of(basic_tensor<T> const& s, double n) : sum(static_cast<double>(s.item())), count(n) {}
};

template <class V = double>
struct sum_of {
  V value{};
};
sum_of(double) -> sum_of<double>;
sum_of(float) -> sum_of<double>;
template <class T> sum_of(basic_tensor<T>) -> sum_of<basic_tensor<T>>;

template <class V = Tensor>
struct concat_of {
  V value{};
};
template <class T> concat_of(basic_tensor<T>) -> concat_of<basic_tensor<T>>;

// A split's metrics once reduced: numbers by name, and tensors (sums of tensors, concatenations).
struct metric_values {
  std::map<std::string, double> scalars;
  std::map<std::string, Tensor> tensors;

  double at(std::string const& name) const {
    if (auto it = scalars.find(name); it != scalars.end()) return it->second;
    std::string known;
    for (auto const& [k, v] : scalars) known += (known.empty() ? "" : ", ") + k;
    throw error("E-METRIC-001", "no metric called '" + name + "' (known: " + known + ")", "name one of the metrics the split reported");
  }
  bool has(std::string const& name) const { return scalars.count(name) != 0; }
};

namespace detail {

struct reducer_state {
  double sum = 0, count = 0;
  bool is_tensor = false;
  Tensor tensor;                  // running sum
  std::vector<float> concat;      // concatenated columns
  nitro::shape concat_shape{};    // feature extents of one sample, batch appended at the end
  std::int64_t concat_samples = 0;
  enum class kind { mean, sum, concat } k = kind::mean;
};

inline void add_tensor_sum(reducer_state& r, Tensor const& x) {
  if (!r.tensor.defined()) {
    r.tensor = Tensor::owned(x.shape());
  } else if (!(r.tensor.shape() == x.shape())) {
    throw error("E-METRIC-002", "a summed metric changed shape from " + r.tensor.shape().to_string() + " to " + x.shape().to_string(),
                "return tensors of one shape for a nitro::sum_of metric in every batch");
  }
  for (std::int64_t i = 0; i < x.numel(); ++i) r.tensor[i] += x[i];
}

}  // namespace detail

// Accumulates what a metrics hook returns, batch after batch, then reduces.
class metric_accumulator {
 public:
  void clear() { m_state.clear(); m_order.clear(); }

  template <class M>
  void add(M const& m) {
    if constexpr (std::is_same_v<M, mean_of>) {
      add_mean("loss", m);
    } else {
      namespace hana = boost::hana;
      hana::for_each(hana::accessors<M>(), [&](auto acc) {
        std::string name = hana::to<char const*>(hana::first(acc));
        add_one(name, hana::second(acc)(m));
      });
    }
  }
  void add_mean(std::string const& name, mean_of const& v) { add_one(name, v); }

  metric_values result() const {
    metric_values out;
    for (auto const& name : m_order) {
      auto const& r = m_state.at(name);
      switch (r.k) {
        case detail::reducer_state::kind::mean:
          out.scalars[name] = r.count > 0 ? r.sum / r.count : 0.0;
          break;
        case detail::reducer_state::kind::sum:
          if (r.is_tensor) out.tensors[name] = r.tensor.clone();
          else out.scalars[name] = r.sum;
          break;
        case detail::reducer_state::kind::concat: {
          nitro::shape s = r.concat_shape.with_last(r.concat_samples);
          Tensor t = Tensor::owned(s);
          if (!r.concat.empty()) std::memcpy(t.data(), r.concat.data(), sizeof(float) * r.concat.size());
          out.tensors[name] = t;
          break;
        }
      }
    }
    return out;
  }

 private:
  detail::reducer_state& state(std::string const& name, detail::reducer_state::kind k) {
    auto [it, fresh] = m_state.try_emplace(name);
    if (fresh) { it->second.k = k; m_order.push_back(name); }
    return it->second;
  }
  void add_one(std::string const& name, mean_of const& v) {
    auto& r = state(name, detail::reducer_state::kind::mean);
    r.sum += v.sum;
    r.count += v.count;
  }
  template <class V>
  void add_one(std::string const& name, sum_of<V> const& v) {
    auto& r = state(name, detail::reducer_state::kind::sum);
    if constexpr (std::is_arithmetic_v<V>) r.sum += static_cast<double>(v.value);
    else { r.is_tensor = true; detail::add_tensor_sum(r, v.value); }
  }
  template <class V>
  void add_one(std::string const& name, concat_of<V> const& v) {
    auto& r = state(name, detail::reducer_state::kind::concat);
    Tensor const& x = v.value;
    nitro::shape per = x.rank() <= 1 ? nitro::shape{} : x.shape().with_last(1);
    if (r.concat_samples == 0) r.concat_shape = x.rank() <= 1 ? nitro::shape{1} : x.shape();
    r.concat.insert(r.concat.end(), x.data(), x.data() + x.numel());
    r.concat_samples += x.rank() == 0 ? 1 : x.batch();
    (void)per;
  }
  template <class V>
  void add_one(std::string const& name, V const&) {
    static_assert(always_false<V>, "nitro: a metrics member must be nitro::mean_of, nitro::sum_of or nitro::concat_of");
    (void)name;
  }

  std::map<std::string, detail::reducer_state> m_state;
  std::vector<std::string> m_order;
};

}  // namespace nitro
