// nitro/tensor/reduction.hpp — the reductions and the softmax a backend computes, by name, and the
// shape they run over.
//
//   ops.reduce(nitro::reduce_op::sum, nitro::reduction_at(x.shape(), 1), x, y);   // sum along dim 1
//   ops.softmax(/*log=*/true, rows, cols, x, y);                                  // per column
//
// A reduction runs along one dimension of extent `extent`, with `inner` elements before it (the
// stride between the values it reduces) and `outer` after it: y has inner * outer values, x
// inner * extent * outer. Reducing everything is {1, n, 1}; a column-wise one (max, logsumexp,
// argmax over the features) is {1, features, columns}.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/shape.hpp"

#include <cstdint>  // int64_t
#include <string>   // messages

namespace nitro {

enum class reduce_op : unsigned char {
  sum,        // y = sum x
  max,        // y = max x; the gradient goes to the first largest
  logsumexp,  // y = log sum exp x, stable; the gradient is the softmax
  argmax,     // y = the first largest's position (0-based) as a value; no gradient
};

constexpr char const* to_string(reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum: return "sum"; case reduce_op::max: return "max";
    case reduce_op::logsumexp: return "logsumexp"; case reduce_op::argmax: return "argmax";
  }
  return "?";
}

struct reduction {
  std::int64_t inner = 1, extent = 0, outer = 1;
};

// A dimension of a shape, counted from 0 (the first, fastest) to rank - 1 (the batch); -1 is the
// batch. E-SHAPE-007 outside.
inline int normalize_dim(shape const& s, int d, char const* op) {
  const int r = s.rank();
  if (d < 0) d += r;
  if (d < 0 || d >= r)
    throw error("E-SHAPE-007", std::string(op) + ": dimension " + std::to_string(d) + " is out of range for shape " + s.to_string(),
                "dimensions count from 0 (the first, fastest) to rank-1 (the batch); -1 is the batch");
  return d;
}
// The reduction along dimension d of s.
inline reduction reduction_at(shape const& s, int d) {
  reduction a{1, s[d], 1};
  for (int i = 0; i < d; ++i) a.inner *= s[i];
  for (int i = d + 1; i < s.rank(); ++i) a.outer *= s[i];
  return a;
}
// The reduction over the first (feature) dimension of every column: a vector is one column.
inline reduction columns_of(shape const& s) {
  const std::int64_t n = s.numel();
  const std::int64_t f = s.rank() <= 1 ? n : s[0];
  return {1, f, f == 0 ? 0 : n / f};
}

}  // namespace nitro
