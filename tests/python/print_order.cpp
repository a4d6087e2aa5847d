// Prints the order in which nitro's training loader hands out samples, for nitro_order_check.py to
// hold bench/lm_torch.py's replay of it to: the samples' ids batch by batch, one epoch a line.
// Usage: print_order <samples> <batch> <run seed> <epochs>
#include <nitro/data/loader.hpp>

#include <cstdio>
#include <cstdlib>

namespace {
struct ids {
  BOOST_HANA_DEFINE_STRUCT(ids, (nitro::Index, id));
};
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <samples> <batch> <run seed> <epochs>\n", argv[0]);
    return 2;
  }
  const std::int64_t n = std::atoll(argv[1]), batch = std::atoll(argv[2]), epochs = std::atoll(argv[4]);
  nitro::Index all = nitro::Index::owned({n});
  for (std::int64_t i = 0; i < n; ++i) all[i] = i;
  const nitro::data::in_memory_split<ids> split("train", ids{all});
  // the handle's training options (train/handle_state.hpp loader_options_for)
  nitro::data::loader<ids> ld(split, {.batch_size = batch, .shuffle = true, .drop_last = true,
                                      .seed = nitro::data::train_order_seed(std::strtoull(argv[3], nullptr, 10))});
  for (std::int64_t e = 0; e < epochs; ++e) {
    ld.start_epoch(static_cast<std::uint64_t>(e));
    while (auto b = ld.next())
      for (std::int64_t i = 0; i < b->id.numel(); ++i) std::printf("%lld ", static_cast<long long>(b->id[i]));
    std::printf("\n");
  }
}
