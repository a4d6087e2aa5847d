// nitro/core/rng.hpp — the random streams: small, fast, and the same bytes on every platform.
//
// nitro never uses <random>'s distributions, whose output differs between standard libraries:
// a seed must give the same run everywhere. The generator is xoshiro256** seeded by splitmix64;
// its whole state is four 64-bit words, so checkpoints carry it exactly. Independent streams are
// derived by folding a stream id into the seed (fold), never by sharing one generator.
#pragma once

#include <array>    // state
#include <cmath>    // log, sqrt, cos
#include <cstdint>  // uint64_t

namespace nitro {

constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// A seed for stream `id` derived from `seed` (layer i's initialisation, epoch e's shuffle, ...).
constexpr std::uint64_t fold(std::uint64_t seed, std::uint64_t id) noexcept {
  return splitmix64(seed ^ splitmix64(id + 0x632be59bd9b4e019ULL));
}

class rng {
 public:
  using result_type = std::uint64_t;
  explicit rng(std::uint64_t seed = 1) noexcept { reseed(seed); }

  void reseed(std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (auto& w : m_s) { x = splitmix64(x); w = x; }
  }
  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return ~result_type(0); }

  result_type operator()() noexcept {
    const std::uint64_t r = rotl(m_s[1] * 5, 7) * 9;
    const std::uint64_t t = m_s[1] << 17;
    m_s[2] ^= m_s[0]; m_s[3] ^= m_s[1]; m_s[1] ^= m_s[2]; m_s[0] ^= m_s[3];
    m_s[2] ^= t;
    m_s[3] = rotl(m_s[3], 45);
    return r;
  }
  // uniform in [0, 1) with 53 random bits
  double uniform() noexcept { return double((*this)() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  // standard normal (Box-Muller; one value per call, so the stream position is simple to reason about)
  double normal() noexcept {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
  }
  // uniform integer in [0, n)
  std::uint64_t below(std::uint64_t n) noexcept {
    // Lemire's nearly divisionless method, with rejection for exact uniformity
    unsigned __int128 m = (unsigned __int128)(*this)() * n;
    std::uint64_t l = static_cast<std::uint64_t>(m);
    if (l < n) {
      std::uint64_t t = (0 - n) % n;
      while (l < t) { m = (unsigned __int128)(*this)() * n; l = static_cast<std::uint64_t>(m); }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  std::array<std::uint64_t, 4> state() const noexcept { return m_s; }
  void set_state(std::array<std::uint64_t, 4> const& s) noexcept { m_s = s; }
  bool operator==(rng const& o) const noexcept { return m_s == o.m_s; }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> m_s{};
};

// Fisher-Yates with nitro's generator: the same permutation on every platform.
template <class It>
void shuffle(It first, It last, rng& g) {
  auto n = last - first;
  for (decltype(n) i = n - 1; i > 0; --i) {
    auto j = static_cast<decltype(n)>(g.below(static_cast<std::uint64_t>(i + 1)));
    auto tmp = first[i]; first[i] = first[j]; first[j] = tmp;
  }
}

}  // namespace nitro
