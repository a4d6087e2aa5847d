// nitro/tensor/shape.hpp — extents of a tensor, column-major, batch dimension last.
//
// A dense layer's input is [features, batch]; an image batch is [width, height, channels, batch]
// (WHCN). The first extent varies fastest in memory, so a batch slice is one contiguous block.
#pragma once

#include "nitro/core/error.hpp"

#include <array>             // extents
#include <cstdint>           // int64_t
#include <initializer_list>  // shape{784, 128}
#include <string>            // to_string

namespace nitro {

class shape {
 public:
  static constexpr int max_rank = 5;

  constexpr shape() noexcept = default;
  constexpr shape(std::initializer_list<std::int64_t> ext) {
    if (ext.size() > max_rank) throw error("E-SHAPE-001", "a tensor has at most 5 dimensions", "reshape to fewer dimensions");
    for (auto e : ext) {
      if (e < 0) throw error("E-SHAPE-002", "a tensor extent must not be negative", "pass non-negative extents");
      m_ext[m_rank++] = e;
    }
  }
  template <class It>
  static shape from(It first, It last) {
    shape s;
    for (; first != last; ++first) {
      if (s.m_rank == max_rank) throw error("E-SHAPE-001", "a tensor has at most 5 dimensions", "reshape to fewer dimensions");
      s.m_ext[s.m_rank++] = static_cast<std::int64_t>(*first);
    }
    return s;
  }

  constexpr int rank() const noexcept { return m_rank; }
  constexpr std::int64_t operator[](int i) const noexcept { return m_ext[i]; }
  constexpr std::int64_t& operator[](int i) noexcept { return m_ext[i]; }
  constexpr std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < m_rank; ++i) n *= m_ext[i];
    return n;
  }
  // The batch extent: the last one (1 for a scalar).
  constexpr std::int64_t batch() const noexcept { return m_rank == 0 ? 1 : m_ext[m_rank - 1]; }
  // Everything but the batch: the rows of the [features, batch] matrix view.
  constexpr std::int64_t features() const noexcept {
    if (m_rank <= 1) return 1;
    std::int64_t n = 1;
    for (int i = 0; i < m_rank - 1; ++i) n *= m_ext[i];
    return n;
  }
  constexpr shape with_last(std::int64_t b) const noexcept {
    shape s = *this;
    if (s.m_rank == 0) { s.m_rank = 1; s.m_ext[0] = b; } else s.m_ext[s.m_rank - 1] = b;
    return s;
  }
  constexpr bool operator==(shape const& o) const noexcept {
    if (m_rank != o.m_rank) return false;
    for (int i = 0; i < m_rank; ++i) if (m_ext[i] != o.m_ext[i]) return false;
    return true;
  }
  std::string to_string() const {
    std::string s = "[";
    for (int i = 0; i < m_rank; ++i) { if (i) s += ", "; s += std::to_string(m_ext[i]); }
    return s + "]";
  }

 private:
  std::array<std::int64_t, max_rank> m_ext{};
  int m_rank = 0;
};

}  // namespace nitro
