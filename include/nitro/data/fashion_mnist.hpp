// nitro/data/fashion_mnist.hpp — the embedded default data set: Fashion-MNIST from Debian's
// `dataset-fashion-mnist` package (files under /usr/share/datasets/fashion-mnist/).
//
// Splits: train (60000 - valid images), valid (held out of train by a fixed seeded draw, so it is
// the same for every run seed) and test (10000). Each batch is
//   img    [28, 28, 1, B]  pixels scaled to [0, 1] (a dense layer reads it as [784, B])
//   label  [10, B]         one-hot
//   idx    [B]             each image's position in its file (never needed on the device)
// Loaded once per process and shared by every handle that asks for the same options.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/data/dataset.hpp"

#include <boost/hana/define_struct.hpp>

#include <cstdint>     // int64_t
#include <string>      // paths

namespace nitro::data {

struct image_batch {
  BOOST_HANA_DEFINE_STRUCT(image_batch, (nitro::Tensor, img), (nitro::Tensor, label), (nitro::Index, idx));
};

// The stock hook inputs of an image_batch: forward reads the images, loss and metrics the labels.
//   auto forward(auto const& m, auto const& ps, auto const& st, nitro::data::image_in const& in) const;
//   auto loss(nitro::Tensor const& logits, nitro::data::label_in const& in) const;
struct image_in {
  BOOST_HANA_DEFINE_STRUCT(image_in, (nitro::Tensor, img));
};
struct label_in {
  BOOST_HANA_DEFINE_STRUCT(label_in, (nitro::Tensor, label));
};

struct fashion_mnist_options {
  std::string dir{};              // empty: $NITRO_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist
  std::int64_t valid = 5000;      // training images held out as the valid split
  std::int64_t train_limit = 0;   // keep only the first n train images (0: all) — for quick runs and tests
  std::int64_t test_limit = 0;    // likewise for test (and valid)
  std::uint64_t split_seed = 20;  // which images are held out; not the run seed, so valid is fixed across seeds

  std::string key() const;  // the process cache's key
};

inline constexpr char const* fashion_mnist_install_hint =
    "install the data set: apt-get install dataset-fashion-mnist (or set NITRO_FASHION_MNIST_DIR to a folder holding "
    "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz)";

// The folder the files are read from: dir, else $NITRO_FASHION_MNIST_DIR, else Debian's.
NITRO_RUNTIME_INLINE std::string fashion_mnist_dir(std::string const& dir);

// The three splits (read once per process for the same options; later calls share the tensors).
NITRO_RUNTIME_INLINE dataset<image_batch> fashion_mnist(fashion_mnist_options opt = {});

}  // namespace nitro::data

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include "nitro/core/cache_stats.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/data/idx.hpp"

#include <algorithm>   // sort, min
#include <cstdlib>     // getenv
#include <filesystem>  // file sizes for the fingerprint
#include <map>         // the process cache
#include <mutex>       // the process cache
#include <numeric>     // iota

namespace nitro::data {

NITRO_RUNTIME_INLINE std::string fashion_mnist_options::key() const {
  return dir + "|" + std::to_string(valid) + "|" + std::to_string(train_limit) + "|" + std::to_string(test_limit) + "|" +
         std::to_string(split_seed);
}

NITRO_RUNTIME_INLINE std::string fashion_mnist_dir(std::string const& dir) {
  if (!dir.empty()) return dir;
  if (char const* env = std::getenv("NITRO_FASHION_MNIST_DIR"); env && *env) return env;
  return "/usr/share/datasets/fashion-mnist";
}

namespace detail {

struct fm_raw { idx_array images, labels; };

inline fm_raw read_fm_pair(std::string const& dir, char const* images, char const* labels) {
  fm_raw r{read_idx(dir + "/" + images, fashion_mnist_install_hint), read_idx(dir + "/" + labels, fashion_mnist_install_hint)};
  if (r.images.dims.size() != 3 || r.images.dims[1] != 28 || r.images.dims[2] != 28)
    throw error("E-DATA-002", "the data file " + dir + "/" + images + " is damaged: it does not hold 28x28 images",
                std::string("reinstall it: ") + fashion_mnist_install_hint);
  if (r.labels.dims.size() != 1 || r.labels.dims[0] != r.images.dims[0])
    throw error("E-DATA-002",
                "the data files " + dir + "/" + images + " and " + labels + " disagree: " + std::to_string(r.images.dims[0]) +
                    " images but " + std::to_string(r.labels.count()) + " labels",
                std::string("reinstall them: ") + fashion_mnist_install_hint);
  for (auto l : r.labels.bytes)
    if (l > 9)
      throw error("E-DATA-002", "the data file " + dir + "/" + labels + " is damaged: it holds the label " + std::to_string(int(l)),
                  std::string("reinstall it: ") + fashion_mnist_install_hint);
  return r;
}

inline image_batch fm_select(fm_raw const& raw, std::vector<std::int64_t> const& which) {
  const std::int64_t n = static_cast<std::int64_t>(which.size());
  image_batch b{Tensor::owned({28, 28, 1, n}), Tensor::owned({10, n}), Index::owned({n})};
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = which[static_cast<std::size_t>(i)];
    std::uint8_t const* src = raw.images.bytes.data() + k * 784;
    float* dst = b.img.data() + i * 784;
    for (int p = 0; p < 784; ++p) dst[p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
    b.label(raw.labels.bytes[static_cast<std::size_t>(k)], i) = 1.0f;
    b.idx[i] = k;
  }
  return b;
}

}  // namespace detail

NITRO_RUNTIME_INLINE dataset<image_batch> fashion_mnist(fashion_mnist_options opt) {
  static std::mutex mutex;
  static std::map<std::string, dataset<image_batch>> cache;
  opt.dir = fashion_mnist_dir(opt.dir);
  static cache_counter& counter = runtime_cache("data.fashion_mnist");  // cache_stats(): hits and misses
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(opt.key()); it != cache.end()) {
    counter.hit();
    return it->second;
  }
  counter.miss();

  if (opt.valid < 0 || opt.valid >= 60000)
    throw error("E-DATA-005", "fashion_mnist: valid = " + std::to_string(opt.valid) + " leaves no training images", "hold out between 0 and 59999 images");
  auto train_raw = detail::read_fm_pair(opt.dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
  auto test_raw = detail::read_fm_pair(opt.dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");

  const std::int64_t n_train_file = train_raw.images.count();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_train_file));
  std::iota(order.begin(), order.end(), 0);
  rng g(opt.split_seed);
  shuffle(order.begin(), order.end(), g);
  const std::int64_t valid = std::min(opt.valid, n_train_file - 1);
  std::vector<std::int64_t> train_idx(order.begin(), order.end() - valid), valid_idx(order.end() - valid, order.end());
  std::sort(train_idx.begin(), train_idx.end());
  std::sort(valid_idx.begin(), valid_idx.end());
  std::vector<std::int64_t> test_idx(static_cast<std::size_t>(test_raw.images.count()));
  std::iota(test_idx.begin(), test_idx.end(), 0);
  auto limit = [](std::vector<std::int64_t>& v, std::int64_t n) { if (n > 0 && n < static_cast<std::int64_t>(v.size())) v.resize(static_cast<std::size_t>(n)); };
  limit(train_idx, opt.train_limit);
  limit(valid_idx, opt.test_limit);
  limit(test_idx, opt.test_limit);

  dataset<image_batch> d;
  d.name = "fashion_mnist";
  d.splits.emplace_back("train", detail::fm_select(train_raw, train_idx));
  if (!valid_idx.empty()) d.splits.emplace_back("valid", detail::fm_select(train_raw, valid_idx));
  d.splits.emplace_back("test", detail::fm_select(test_raw, test_idx));
  std::error_code ec;
  d.classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  d.fingerprint = "fashion_mnist:" + opt.dir + ":train-images=" +
                  std::to_string(std::filesystem::file_size(opt.dir + "/train-images-idx3-ubyte.gz", ec)) + "B" +
                  ":split_seed=" + std::to_string(opt.split_seed) + ":valid=" + std::to_string(valid) +
                  ":train=" + std::to_string(train_idx.size()) + ":test=" + std::to_string(test_idx.size());
  cache.emplace(opt.key(), d);
  return d;
}

}  // namespace nitro::data
#endif  // !NITRO_RUNTIME_EXTERN
