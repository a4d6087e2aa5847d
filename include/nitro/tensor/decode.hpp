// nitro/tensor/decode.hpp — incremental decoding: the keys and values of the tokens seen so far.
//
//   nitro::decode_cache cache;
//   { nitro::decode_scope d(cache, 12); logits = model(prompt); }     // 12 tokens: attention keeps their keys and values
//   { nitro::decode_scope d(cache, 1); logits = model(next_token); }  // one token: attends to everything cached
//
// While a decode_scope is open on a thread, every causal_attention call (tensor/ops/attention.hpp)
// of a forward takes its own slot in the cache, in call order: it appends the new tokens' keys and
// values and attends over all of the slot's, so a token costs one column of work per layer instead
// of the whole window again. Position-dependent layers (nn::positional_embedding) read where the
// new tokens start (`length()`) and say how many positions they hold (`limit_positions`). Closing
// the scope advances the length by the tokens the forward took. A slot's buffers are sized for the
// model's positions when it is first filled and kept (clear() keeps them too): decoding token by
// token allocates nothing after the first forward. No gradients: decoding is inference.
#pragma once

#include <cstdint>  // int64_t
#include <limits>   // max
#include <utility>  // pair
#include <vector>   // slots

namespace nitro {

class decode_cache {
 public:
  std::int64_t length() const noexcept { return m_length; }  // tokens already cached
  std::int64_t positions() const noexcept { return m_positions; }  // the fewest positions a layer of the model holds
  void limit_positions(std::int64_t n) noexcept { m_positions = n < m_positions ? n : m_positions; }
  void clear() noexcept {
    m_length = 0;
    m_used = 0;
  }

  // The next attention call's slot: keys and values of `width` features for at least `tokens`
  // positions (the cached ones and the new ones).
  struct slot {
    std::vector<double>* keys;
    std::vector<double>* values;
  };
  slot next_slot(std::int64_t width, std::int64_t tokens) {
    if (m_used == m_slots.size()) m_slots.emplace_back();
    auto& s = m_slots[m_used++];
    const auto need = static_cast<std::size_t>(width * tokens);
    if (s.first.size() < need) {
      const bool bounded = m_positions != std::numeric_limits<std::int64_t>::max();
      const std::size_t size = bounded && tokens <= m_positions ? static_cast<std::size_t>(width * m_positions) : need * 2;
      s.first.resize(size);
      s.second.resize(size);
    }
    return {&s.first, &s.second};
  }

  // Called by decode_scope: the forward that took `tokens` new tokens is over.
  void advance(std::int64_t tokens) noexcept {
    m_length += tokens;
    m_used = 0;
  }
  void begin() noexcept { m_used = 0; }

 private:
  std::vector<std::pair<std::vector<double>, std::vector<double>>> m_slots;  // (keys, values) [width, positions]
  std::size_t m_used = 0;
  std::int64_t m_length = 0;
  std::int64_t m_positions = std::numeric_limits<std::int64_t>::max();
};

namespace detail {
inline decode_cache*& current_decode() noexcept {
  thread_local decode_cache* cache = nullptr;
  return cache;
}
}  // namespace detail

// Opens the cache for one forward of `tokens` new tokens; closing it advances the cache.
class decode_scope {
 public:
  decode_scope(decode_cache& c, std::int64_t tokens) noexcept : m_cache(c), m_tokens(tokens), m_prev(detail::current_decode()) {
    c.begin();
    detail::current_decode() = &c;
  }
  ~decode_scope() {
    detail::current_decode() = m_prev;
    m_cache.advance(m_tokens);
  }
  decode_scope(decode_scope const&) = delete;
  decode_scope& operator=(decode_scope const&) = delete;

 private:
  decode_cache& m_cache;
  std::int64_t m_tokens;
  decode_cache* m_prev;
};

}  // namespace nitro
