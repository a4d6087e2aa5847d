// nitro/tensor/detail/record.hpp — what every differentiable operation does first: decide whether
// its output needs a gradient, allocate it, and give it a tape variable. Internal.
#pragma once

#include "nitro/tensor/tensor.hpp"

#include <Eigen/Core>

namespace nitro::detail {

// Is a gradient being recorded, and does any input carry one?
template <class... X>
inline bool needs_grad(X const&... x) noexcept {
  step_context* c = current_context();
  return c && c->tape && (x.requires_grad() || ...);
}
inline nitro::tape& active_tape() noexcept { return *current_context()->tape; }

template <class T>
basic_tensor<T> make_output(shape s, bool grad) {
  basic_tensor<T> out = basic_tensor<T>::empty(s);
  if (grad) out.set_var(active_tape().new_var(sizeof(T) * static_cast<std::size_t>(s.numel() == 0 ? 1 : s.numel())));
  return out;
}

// The flat and matrix views every CPU kernel works on.
template <class T> using vec_map = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned16>;
template <class T> using cvec_map = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using uvec_map = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using mat_map = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T> using cmat_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;

template <class T> inline uvec_map<T> flat(T* p, std::int64_t n) { return uvec_map<T>(p, n); }
template <class T> inline cvec_map<T> flat(T const* p, std::int64_t n) { return cvec_map<T>(p, n); }
template <class T> inline cvec_map<T> flat(basic_tensor<T> const& t) { return cvec_map<T>(t.data(), t.numel()); }
template <class T> inline uvec_map<T> flat(basic_tensor<T>& t) { return uvec_map<T>(t.data(), t.numel()); }
// [features, batch] view of any tensor (rank 0 and 1 are one column)
template <class T> inline cmat_map<T> matrix(basic_tensor<T> const& t) {
  return cmat_map<T>(t.data(), t.rank() <= 1 ? t.numel() : t.features(), t.rank() <= 1 ? 1 : t.batch());
}
template <class T> inline mat_map<T> matrix(basic_tensor<T>& t) {
  return mat_map<T>(t.data(), t.rank() <= 1 ? t.numel() : t.features(), t.rank() <= 1 ? 1 : t.batch());
}

}  // namespace nitro::detail
