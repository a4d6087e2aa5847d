// Writes what tests/python-ckpt/check_checkpoint.py reads: a checkpoint of a small MLP trained for
// a few steps on a slice of Fashion-MNIST, with a batch of test images and nitro's logits for them,
// and expected.json holding every parameter value (in memory order) and a few probes W(i, j).
//   ckpt_python_writer OUT.safetensors EXPECTED.json
#include <nitro/nitro.hpp>
#include <nitro/record/checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>   // errors
#include <fstream>  // expected.json

namespace pyckpt {
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

struct Small {
  int max_epochs = 1;
  std::int64_t batch_size = 64;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = 640, .test_limit = 64}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 16>(nitro::nn::relu), nitro::nn::dense<16, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
};
NITRO_EXPERIMENT(Small, max_epochs, batch_size);
}  // namespace pyckpt
using pyckpt::Small;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.safetensors EXPECTED.json\n", argv[0]);
    return 2;
  }
  try {
    nitro::Nitro h(Small{}, nitro::seed = 11);
    h.train(false);
    auto const& test = h.data().split("test");
    nitro::data::loader<decltype(h)::batch_type> ld(test, {8, false, false, 1, 0});
    ld.start_epoch(0);
    auto batch = *ld.next();
    nitro::Tensor img = batch.img.clone();
    nitro::Tensor logits = h.predict(batch);

    nitro::safetensors_writer w;
    nitro::add_store(w, "params.", h.param_buffer());
    w.add("data.img", img);
    w.add("data.logits", logits);
    nitro::checkpoint_info info{.step = h.step(), .epoch = h.epoch(), .batch_in_epoch = 0, .seed = h.seed().value,
                                .metrics = {{"train.note", 0.125}}, .selection = {{"experiment", "Small"}}};
    info.seq = 1;
    nitro::write_checkpoint_metadata(w, info);
    w.write(argv[1]);

    nlohmann::json ex;
    ex["step"] = h.step();
    ex["seed"] = std::to_string(h.seed().value);
    auto values = [](float const* p, nitro::shape s) {
      std::vector<double> v(static_cast<std::size_t>(s.numel()));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
      return v;
    };
    auto dims = [](nitro::shape s) {
      std::vector<std::int64_t> d;
      for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
      return d;
    };
    for (auto const& li : decltype(h)::param_store_type::leaves) {
      auto const* p = h.param_buffer().values() + li.offset;
      ex["tensors"]["params." + std::string(li.keypath)] = {{"nitro_shape", dims(li.shape())}, {"values", values(p, li.shape())}};
    }
    ex["tensors"]["data.logits"] = {{"nitro_shape", dims(logits.shape())}, {"values", values(logits.data(), logits.shape())}};
    // probes: nitro's W(i, j) of the first layer, column-major: offset i + j * rows
    auto const& l1 = decltype(h)::param_store_type::leaves[0];
    for (auto [i, j] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {3, 100}, {15, 783}})
      ex["probes"].push_back({{"name", "params." + std::string(l1.keypath)}, {"nitro_index", {i, j}},
                              {"value", static_cast<double>(h.param_buffer().values()[l1.offset + i + j * l1.dims[0]])}});
    std::ofstream(argv[2]) << ex.dump(1) << "\n";
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
