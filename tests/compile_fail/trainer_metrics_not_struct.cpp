// The metrics hook returns a bare number instead of a struct of reducers.
// EXPECT: nitro::metrics_must_return_a_struct<nitro::hook::metrics, nitro::returns<double> ?>
// EXPECT: E-METRIC-003
#include <nitro/nn/metrics.hpp>

struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

int main() {
  nitro::metric_accumulator acc;
#ifdef NITRO_COMPILE_FAIL
  acc.add(0.5);
#else
  acc.add(Metrics{{0.5, 1.0}});
#endif
  return static_cast<int>(acc.batches()) - 1;
}
