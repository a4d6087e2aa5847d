// A member of the metrics struct that is not a reducer (mean_of, sum_of, concat_of).
// EXPECT: nitro::metric_is_not_a_reducer<nitro::metric_member_at<&Metrics::acc>, float>
// EXPECT: E-METRIC-004
#include <nitro/nn/metrics.hpp>

struct Metrics {
#ifdef NITRO_COMPILE_FAIL
  BOOST_HANA_DEFINE_STRUCT(Metrics, (float, acc));
#else
  BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc));
#endif
};

int main() {
  nitro::metric_accumulator acc;
  acc.add(Metrics{});
  return static_cast<int>(acc.batches()) - 1;
}
