// metrics_residency(hook) must say where: nitro::residency::device or ::host.
// EXPECT: nitro::metrics_residency_has_wrong_type<nitro::hook::metrics, nitro::returns<
// EXPECT: E-METRIC-009
#include <nitro/nn/metrics.hpp>

#include <string>

struct Exp {
#ifdef NITRO_COMPILE_FAIL
  std::string metrics_residency(nitro::hook::metrics) const { return "host"; }
#else
  nitro::residency metrics_residency(nitro::hook::metrics) const { return nitro::residency::host; }
#endif
};

int main() { return nitro::metrics_residency_of<nitro::hook::metrics>(Exp{}) == nitro::residency::host ? 0 : 1; }
