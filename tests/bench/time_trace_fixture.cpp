// A translation unit for ctest bench.time_trace: one function specialised for an "experiment"
// (Widget<W>, what --experiment matches) and one that depends on none (describe), so the breakdown
// must put code on both sides of its split.
#include <map>
#include <string>
#include <vector>

namespace user {
template <int W>
struct Widget {
  std::vector<float> values = std::vector<float>(W, 1.f);
  [[gnu::noinline]] float sum() const {
    float s = 0;
    for (float x : values) s += x;
    return s;
  }
};
}  // namespace user

std::string describe(std::map<std::string, int> const& m) {
  std::string s;
  for (auto const& [k, v] : m) s += k + "=" + std::to_string(v) + ";";
  return s;
}
float run() { return user::Widget<3>{}.sum() + user::Widget<7>{}.sum(); }
