// nitro/data/dataset.hpp — data sets held in memory: named splits of batch-last fields.
//
// A split holds every sample of every field of a batch type (a Boost.Hana struct of nitro::Tensor
// and nitro::Index fields), the sample dimension last. A loader gathers batches from it by sample
// index into buffers it owns. Any data a user has as tensors becomes a data set this way:
//   nitro::data::dataset<MyBatch> d{"mine", {"train", MyBatch{x, y}}, {"test", MyBatch{xt, yt}}};
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/tensor/tensor.hpp"

#include <boost/hana/define_struct.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>
#include <boost/hana/accessors.hpp>
#include <boost/hana/at_key.hpp>
#include <boost/hana/members.hpp>
#include <boost/hana/string.hpp>

#include <cstdint>      // int64_t
#include <cstring>      // memcpy
#include <string>       // names
#include <string_view>  // lookups
#include <utility>      // move
#include <vector>       // splits

namespace nitro::data {

namespace hana = boost::hana;

namespace detail {  // the errors, made once (nitro::runtime) for every batch type
[[noreturn]] NITRO_RUNTIME_INLINE void unequal_samples(std::string const& split, char const* field, std::int64_t n, std::int64_t earlier);
[[noreturn]] NITRO_RUNTIME_INLINE void no_such_split(std::string const& dataset, std::string_view asked, std::string const& names);
NITRO_RUNTIME_INLINE void list_name(std::string& names, std::string const& name);  // "a, b" + name
}  // namespace detail

template <class Batch>
class in_memory_split {
 public:
  using batch_type = Batch;

  in_memory_split() = default;
  in_memory_split(std::string name, Batch all) : m_name(std::move(name)), m_all(std::move(all)) {
    m_size = -1;
    hana::for_each(hana::accessors<Batch>(), [&](auto acc) {
      auto const& t = hana::second(acc)(m_all);
      std::int64_t n = t.rank() == 0 ? 1 : t.batch();
      if (m_size < 0) m_size = n;
      else if (n != m_size) detail::unequal_samples(m_name, hana::to<char const*>(hana::first(acc)), n, m_size);
    });
    if (m_size < 0) m_size = 0;
  }

  std::string const& name() const noexcept { return m_name; }
  std::int64_t size() const noexcept { return m_size; }
  Batch const& all() const noexcept { return m_all; }

  // Buffers for batches of up to `max_batch` samples: owned tensors shaped like the fields.
  Batch make_buffers(std::int64_t max_batch) const {
    Batch b;
    hana::for_each(hana::keys(m_all), [&](auto key) {
      auto const& src = hana::at_key(m_all, key);
      using Field = std::remove_cvref_t<decltype(src)>;
      hana::at_key(b, key) = Field::owned(src.shape().with_last(max_batch));
    });
    return b;
  }

  // Copies samples indices[0..n) into the buffers; returns views of exactly n samples.
  Batch gather(std::int64_t const* indices, std::int64_t n, Batch const& buffers) const {
    Batch out;
    hana::for_each(hana::keys(m_all), [&](auto key) {
      auto const& src = hana::at_key(m_all, key);
      auto const& buf = hana::at_key(buffers, key);
      using Field = std::remove_cvref_t<decltype(src)>;
      using S = typename Field::scalar;
      const std::int64_t f = src.rank() <= 1 ? 1 : src.features();
      S* dst = const_cast<S*>(buf.data());
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * f, src.data() + indices[i] * f, sizeof(S) * static_cast<std::size_t>(f));
      hana::at_key(out, key) = Field(dst, src.shape().with_last(n));
    });
    return out;
  }

 private:
  std::string m_name;
  Batch m_all{};
  std::int64_t m_size = 0;
};

template <class Batch>
struct dataset {
  using batch_type = Batch;
  std::string name;
  std::vector<in_memory_split<Batch>> splits;
  std::string fingerprint;  // identifies the data for manifests (files and sizes, or a user's tag)
  std::vector<std::string> classes;  // class names by label index, when the data set knows them (else empty)

  bool has(std::string_view split) const noexcept {
    for (auto const& s : splits) if (s.name() == split) return true;
    return false;
  }
  in_memory_split<Batch> const& split(std::string_view name_) const {
    for (auto const& s : splits) if (s.name() == name_) return s;
    std::string names;
    for (auto const& s : splits) detail::list_name(names, s.name());
    detail::no_such_split(name, name_, names);
  }
};

}  // namespace nitro::data

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::data::detail {

NITRO_RUNTIME_INLINE void unequal_samples(std::string const& split, char const* field, std::int64_t n, std::int64_t earlier) {
  throw error("E-DATA-003",
              "split '" + split + "': field '" + field + "' has " + std::to_string(n) + " samples but an earlier field has " +
                  std::to_string(earlier),
              "give every field the same last (sample) extent");
}

NITRO_RUNTIME_INLINE void no_such_split(std::string const& dataset, std::string_view asked, std::string const& names) {
  throw error("E-DATA-004", "the data set '" + dataset + "' has no split called '" + std::string(asked) + "' (it has: " + names + ")",
              "ask for one of the splits it has");
}

NITRO_RUNTIME_INLINE void list_name(std::string& names, std::string const& name) {
  if (!names.empty()) names += ", ";
  names += name;
}

}  // namespace nitro::data::detail
#endif  // !NITRO_RUNTIME_EXTERN
