// nitro/nn/reducers.hpp — the reducers a metrics hook returns (mean_of, sum_of, concat_of), a split's
// reduced values (metric_values), and the compile-time checks of a metrics struct.
//
// What each reducer means, and how a split's metrics add up, is nn/metrics.hpp (the accumulator).
#pragma once

#include "nitro/core/runtime.hpp"

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

// ---- the reducers ------------------------------------------------------------------------------

// A one-element tensor left in the memory of the device that computed it: what mean_of keeps
// instead of reading the value back each batch, so the accumulator can add it up there
// (nn/metrics.hpp). It views the step's arena: it is read, or added, before the step ends.
struct device_number {
  float const* f = nullptr;   // the value, when the tensor is float
  double const* d = nullptr;  // ... or double
  device_memory* memory = nullptr;
  explicit operator bool() const noexcept { return memory != nullptr; }
  // The value on the host: one crossing (a wait for the device).
  double read() const {
    if (f) {
      float v = 0;
      memory->copy_to_host(&v, f, sizeof v);
      return static_cast<double>(v);
    }
    double v = 0;
    memory->copy_to_host(&v, d, sizeof v);
    return v;
  }
};

struct mean_of {
  double sum = 0;
  double count = 0;
  device_number sum_on_device;  // the sum, when it is a one-element tensor on a device: added to `sum`
  mean_of() = default;
  mean_of(double s, double n) : sum(s), count(n) {}
  // A tensor on the host is read now; one on a device stays there (sum_on_device).
  template <class T>
  mean_of(basic_tensor<T> const& s, double n) : count(n) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (s.memory() && s.numel() == 1) {
        sum_on_device.memory = s.memory();
        if constexpr (std::is_same_v<T, float>) sum_on_device.f = s.data();
        else sum_on_device.d = s.data();
        return;
      }
    }
    sum = static_cast<double>(s.item());  // E-SHAPE-004 for more than one element
  }
  // The whole sum on the host, reading the device's part back (one crossing) when there is one.
  double host_sum() const { return sum_on_device ? sum + sum_on_device.read() : sum; }
};

template <class V = double>
struct sum_of {
  V value{};
};
sum_of(double) -> sum_of<double>;
sum_of(float) -> sum_of<double>;
sum_of(int) -> sum_of<double>;
sum_of(long) -> sum_of<double>;
sum_of(long long) -> sum_of<double>;
template <class T> sum_of(basic_tensor<T>) -> sum_of<basic_tensor<T>>;

template <class V = Tensor>
struct concat_of {
  V value{};
};
template <class V> concat_of(V) -> concat_of<V>;

// ---- a split's metrics, reduced -----------------------------------------------------------------

struct metric_values {
  std::map<std::string, double> scalars;   // means, summed numbers
  std::map<std::string, Tensor> tensors;   // summed tensors, concatenations (owned)
  residency accumulated_on = residency::device;  // where the metrics hook's reducers accumulated
  residency finalized_on = residency::host;      // where finalize_metrics ran
  std::int64_t batches = 0;
  // Device-to-host copies the accumulation made: one per split under device residency (whatever
  // the batches), one per value on a device per batch under host residency; 0 when every value
  // was in host memory already (the CPU backend).
  std::int64_t host_crossings = 0;

  double at(std::string const& name) const {
    if (auto it = scalars.find(name); it != scalars.end()) return it->second;
    throw error("E-METRIC-001", "no metric called '" + name + "' (known: " + known() + ")", "name one of the metrics the split reported");
  }
  bool has(std::string const& name) const { return scalars.count(name) != 0; }
  Tensor const& tensor(std::string const& name) const {
    if (auto it = tensors.find(name); it != tensors.end()) return it->second;
    throw error("E-METRIC-001", "no tensor metric called '" + name + "' (known: " + known() + ")",
                "name one of the summed or concatenated metrics the split reported");
  }
  bool has_tensor(std::string const& name) const { return tensors.count(name) != 0; }

 private:
  std::string known() const;
};

// ---- compile-time diagnostics ---------------------------------------------------------------------

template <class Member> struct metric_member {};
template <auto P> struct metric_member_at {};

template <class Hook, class Returned>
struct metrics_must_return_a_struct {
  static_assert(always_false<Hook, Returned>,
                "E-METRIC-003: the metrics hook must return a Boost.Hana struct of reducers. Fix: "
                "struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); }; and return Metrics{...}.");
  static constexpr bool ok = false;
};
template <class Member, class Type>
struct metric_is_not_a_reducer {
  static_assert(always_false<Member, Type>,
                "E-METRIC-004: a member of the metrics struct is not a reducer. Fix: declare it nitro::mean_of (x => n), "
                "nitro::sum_of<double> or nitro::sum_of<nitro::Tensor> (=> :sum), or nitro::concat_of<...> (=> :concat); "
                "a per-batch number is nitro::mean_of{x, 1}.");
  static constexpr bool ok = false;
};
template <class Hook, class ReturnedOrExperiment>
struct finalize_metrics_has_wrong_signature {
  static_assert(always_false<Hook, ReturnedOrExperiment>,
                "E-METRIC-008: finalize_metrics must take (nitro::metric_values, std::string_view split) and return "
                "nitro::metric_values (or take nitro::metric_values& and return void). Fix: "
                "nitro::metric_values finalize_metrics(nitro::metric_values acc, std::string_view split) const.");
  static constexpr bool ok = false;
};
template <class Hook, class Returned>
struct metrics_residency_has_wrong_type {
  static_assert(always_false<Hook, Returned>,
                "E-METRIC-009: metrics_residency(hook) must return nitro::residency (device or host). Fix: "
                "nitro::residency metrics_residency(nitro::hook::metrics) const { return nitro::residency::host; }");
  static constexpr bool ok = false;
};

namespace detail {

enum class reducer_kind { mean, sum, concat };

template <class T> struct is_basic_tensor : std::false_type {};
template <class T> struct is_basic_tensor<basic_tensor<T>> : std::true_type {};

template <class T> struct reducer_traits { static constexpr bool is_reducer = false; static constexpr std::size_t leaves = 1; };
template <> struct reducer_traits<mean_of> {
  static constexpr bool is_reducer = true;
  static constexpr reducer_kind kind = reducer_kind::mean;
  static constexpr std::size_t leaves = 1;
};
template <class V> struct reducer_traits<sum_of<V>> {
  static constexpr bool is_reducer = std::is_arithmetic_v<V> || is_basic_tensor<V>::value;
  static constexpr reducer_kind kind = reducer_kind::sum;
  static constexpr std::size_t leaves = 1;
};
template <class V> struct reducer_traits<concat_of<V>> {
  static constexpr bool is_struct = is_hana_struct_v<V>;
  static constexpr bool is_reducer = is_basic_tensor<V>::value || is_struct;
  static constexpr reducer_kind kind = reducer_kind::concat;
  static constexpr std::size_t leaves = [] {
    if constexpr (is_struct) return member_count<V>;
    else return std::size_t{1};
  }();
};

// Slots used by the members before member I of M.
template <class M, std::size_t... J>
constexpr std::size_t leaves_before(std::index_sequence<J...>) noexcept {
  return (std::size_t{0} + ... + reducer_traits<std::remove_cvref_t<decltype(accessor_at<M, J>{}(std::declval<M const&>()))>>::leaves);
}
template <class M, std::size_t I>
inline constexpr std::size_t slot_offset = leaves_before<M>(std::make_index_sequence<I>{});

template <class M, std::size_t I>
using member_t = std::remove_cvref_t<decltype(accessor_at<M, I>{}(std::declval<M const&>()))>;

template <class M>
constexpr bool check_metrics_struct() {
  if constexpr (!is_hana_struct_v<M>) {
    return metrics_must_return_a_struct<hook::metrics, returns<M>>::ok;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return ([] {
        using T = member_t<M, I>;
        if constexpr (reducer_traits<T>::is_reducer) return true;
        else if constexpr (accessor_member_ptr<accessor_at<M, I>>::known)
          return metric_is_not_a_reducer<metric_member_at<accessor_member_ptr<accessor_at<M, I>>::value>, T>::ok;
        else return metric_is_not_a_reducer<metric_member<M>, T>::ok;
      }() && ...);
    }(std::make_index_sequence<member_count<M>>{});
  }
}

template <class M> struct type_tag { static constexpr char id = 0; };

}  // namespace detail

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE std::string metric_values::known() const {
  std::string s;
  for (auto const& [k, v] : scalars) s += (s.empty() ? "" : ", ") + k;
  for (auto const& [k, v] : tensors) s += (s.empty() ? "" : ", ") + k + " (tensor)";
  return s.empty() ? "none" : s;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
