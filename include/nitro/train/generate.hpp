// nitro/train/generate.hpp — text from a trained byte-level language model, one token at a time.
//
//   nitro::Nitro h(TinyLM<2, 128>{}, nitro::weights = ...);
//   std::string text = nitro::generate_text(h, "The cat", {.tokens = 300, .temperature = 0.8, .top_k = 40});
//
// The handle's forward hook must take `nitro::data::tokens_in` (tokens [T, B] as bytes) and return
// logits [256, T, B]: a batch with no targets, forward alone (Nitro::predict). The prompt goes
// through the model once; every next token is drawn from the last logits (divided by the
// temperature, cut to the top k, softmax) and fed back alone: attention keeps the keys and values
// of everything before it (tensor/decode.hpp), so a token costs one column of work per layer. When
// the cache holds as many positions as the model has (positional_embedding<Seq, ...>), the window
// slides: the cache restarts from the last Seq / 2 tokens. Draws are seeded: one seed, one text.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/data/text.hpp"
#include "nitro/tensor/decode.hpp"

#include <algorithm>   // partial_sort
#include <cmath>       // exp
#include <cstdint>     // int64_t
#include <functional>  // on_token
#include <numeric>     // iota
#include <string>      // text
#include <vector>      // logits

namespace nitro {

struct generate_options {
  std::int64_t tokens = 300;   // bytes to generate
  double temperature = 0.8;    // > 0; below 1 sharpens the distribution
  std::int64_t top_k = 40;     // draw among the k likeliest bytes (0: all 256)
  std::uint64_t seed = 1;
  std::function<void(char)> on_token{};  // called with each byte as it is drawn (printing as it goes)
};

namespace detail {
// A byte drawn from one column of logits.
inline int draw_byte(float const* logits, std::int64_t vocab, generate_options const& o, rng& g, std::vector<int>& order,
                     std::vector<double>& p) {
  order.resize(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const std::int64_t k = o.top_k > 0 && o.top_k < vocab ? o.top_k : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  p.resize(static_cast<std::size_t>(k));
  const double top = logits[order[0]];
  double sum = 0;
  for (std::int64_t i = 0; i < k; ++i) sum += (p[std::size_t(i)] = std::exp((double(logits[order[std::size_t(i)]]) - top) / o.temperature));
  double u = g.uniform(0.0, sum);
  for (std::int64_t i = 0; i < k; ++i) {
    if (u < p[std::size_t(i)]) return order[std::size_t(i)];
    u -= p[std::size_t(i)];
  }
  return order[std::size_t(k - 1)];
}
}  // namespace detail

template <class Handle>
std::string generate_text(Handle& h, std::string const& prompt, generate_options const& o) {
  if (!(o.temperature > 0))
    throw error("E-GEN-001", "generation: temperature " + std::to_string(o.temperature) + " is not above 0", "use a temperature such as 0.8");
  if (o.tokens < 0 || o.top_k < 0)
    throw error("E-GEN-001", "generation: tokens and top-k cannot be negative", "e.g. --tokens 300 --top-k 40");
  std::string history = prompt.empty() ? std::string("\n") : prompt;
  decode_cache cache;
  rng g(fold(o.seed, 0x9e4a));
  std::vector<int> order;
  std::vector<double> p;
  // one forward of `count` tokens of history starting at `from`: the logits of its last token
  auto feed = [&](std::size_t from, std::size_t count) {
    data::tokens_in in{Tensor::owned({static_cast<std::int64_t>(count), 1})};
    for (std::size_t i = 0; i < count; ++i) in.tokens[static_cast<std::int64_t>(i)] = float(static_cast<unsigned char>(history[from + i]));
    decode_scope scope(cache, static_cast<std::int64_t>(count));
    return h.predict(in);
  };
  auto logits = feed(0, history.size());
  std::string out;
  for (std::int64_t n = 0; n < o.tokens; ++n) {
    const std::int64_t vocab = logits.size(0);
    const std::int64_t last = logits.numel() / vocab - 1;
    const int byte = detail::draw_byte(logits.data() + last * vocab, vocab, o, g, order, p);
    const char ch = static_cast<char>(byte);
    out.push_back(ch);
    history.push_back(ch);
    if (o.on_token) o.on_token(ch);
    if (n + 1 == o.tokens) break;
    if (cache.length() + 1 > cache.positions()) {  // the window is full: restart from its second half
      const std::size_t keep = static_cast<std::size_t>(std::max<std::int64_t>(cache.positions() / 2, 1));
      cache.clear();
      logits = feed(history.size() - keep, keep);
    } else {
      logits = feed(history.size() - 1, 1);
    }
  }
  return out;
}

}  // namespace nitro
