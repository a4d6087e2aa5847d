// Shared by the compile-fail tests: a small batch type and hook inputs.
#pragma once
#include <nitro/nitro.hpp>

namespace cf {
struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, img), (nitro::Index, idx)); };
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Labelled { BOOST_HANA_DEFINE_STRUCT(Labelled, (nitro::Tensor, img), (nitro::Tensor, label), (nitro::Index, idx)); };

inline nitro::data::dataset<Batch> unlabelled() { return {"images", {{"train", Batch{nitro::Tensor::owned({4, 8}), nitro::Index::owned({8})}}}, "cf"}; }
inline nitro::data::dataset<Labelled> labelled() {
  return {"images", {{"train", Labelled{nitro::Tensor::owned({4, 8}), nitro::Tensor::owned({2, 8}), nitro::Index::owned({8})}}}, "cf"};
}
}  // namespace cf
