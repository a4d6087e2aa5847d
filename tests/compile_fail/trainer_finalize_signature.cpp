// finalize_metrics returns something that is not the metric values.
// EXPECT: nitro::finalize_metrics_has_wrong_signature<nitro::hook::finalize_metrics, nitro::returns<int> ?>
// EXPECT: E-METRIC-008
#include <nitro/nn/metrics.hpp>

#include <string_view>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  int finalize_metrics(nitro::metric_values const& acc, std::string_view) const { return static_cast<int>(acc.scalars.size()); }
#else
  nitro::metric_values finalize_metrics(nitro::metric_values acc, std::string_view) const { return acc; }
#endif
};

int main() {
  auto v = nitro::finalize_metrics(Exp{}, nitro::metric_values{}, "valid");
  return static_cast<int>(v.scalars.size());
}
