// nitro/nn/classification.hpp — a classifier's metrics, ready-made: accuracy, and the confusion matrix.
//
//   auto metrics(nitro::Tensor const& logits, nitro::data::label_in const& in) const {
//     return nitro::nn::accuracy(logits, in.label);          // acc
//   }
//   ... or nitro::nn::classification(logits, in.label)         // acc, and the split's confusion matrix
//
// `logits` is [C, B]; the target is one-hot (or soft) [C, B] or class indices [1, B] / [B], as
// correct_count takes them. confusion_matrix(logits, target)(i, j) counts the samples of true class
// i predicted as j (the largest logit); summed over a split (sum_of) it is the split's matrix, whose
// trace over its total is the accuracy. Outside a step it owns its memory; inside one it lives in
// the step's arena.
#pragma once

#include "nitro/nn/losses.hpp"
#include "nitro/nn/metrics.hpp"
#include "nitro/tensor/tensor.hpp"

#include <boost/hana/define_struct.hpp>

#include <cstdint>  // int64_t

namespace nitro {

// What nn::accuracy returns: acc = correct => samples.
struct accuracy_metrics {
  BOOST_HANA_DEFINE_STRUCT(accuracy_metrics, (mean_of, acc));
};
// What nn::classification returns: acc, and the confusion matrix summed over the split.
struct classification_metrics {
  BOOST_HANA_DEFINE_STRUCT(classification_metrics, (mean_of, acc), (sum_of<Tensor>, confusion));
};

namespace nn {

// [C, C]: entry (true class, predicted class) counts the batch's samples.
template <class T>
basic_tensor<T> confusion_matrix(basic_tensor<T> const& logits, basic_tensor<T> const& target) {
  const std::int64_t C = logits.rank() <= 1 ? logits.numel() : logits.shape()[0];
  const std::int64_t B = C == 0 ? 0 : logits.numel() / C;
  const bool indices = !(target.shape() == logits.shape());
  basic_tensor<T> m = basic_tensor<T>::full(shape{C, C}, T(0));  // column-major: (i, j) at i + j * C
  nitro::detail::active_ops().classification_counts(C, B, logits.data(), target.data(), indices, static_cast<T*>(nullptr), m.data());
  return m;
}

inline accuracy_metrics accuracy(Tensor const& logits, Tensor const& target) {
  return {.acc = {correct(logits, target), double(logits.rank() <= 1 ? 1 : logits.batch())}};  // the count stays where it was made
}

inline classification_metrics classification(Tensor const& logits, Tensor const& target) {
  return {.acc = accuracy(logits, target).acc, .confusion = {confusion_matrix(logits, target)}};
}

}  // namespace nn
}  // namespace nitro
