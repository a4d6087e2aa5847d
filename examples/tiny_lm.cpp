// tiny_lm — the knobs note's run: a byte-level transformer language model on Debian's fortunes,
// with its command line (nitro::main): knobs, variants, sweeps and run records.
//
//   ./tiny_lm run                        4 blocks of width 256 over windows of 1024 bytes, 120 steps
//   ./tiny_lm run --variant smoke        2 blocks of width 128, seq 64: a minute on 2 cores
//   ./tiny_lm run --set text=book.txt    your own text (a missing, empty or short file: E-DATA-010..012)
//   ./tiny_lm variants                   the note's knobs, variants and sweep
//   ./tiny_lm sweep seeds                three seeds
//   ./tiny_lm ir --variant small         the model, layer by layer, with its parameter paths
//
//   layers, width   GraphConst: compiled in; each (layers, width) in nitro::main<...> is a program
//   seq             Host: the windows the data set cuts (at most the 1024 positions the model holds)
//   lr              the peak of the default group's warm-up + cosine curve; the embeddings train at
//                   half of it, and neither they nor the norms decay
//
// The model is a struct of named sub-layers (nn::model): token and position embeddings, `layers`
// pre-LN blocks (each its own struct: ln1, attn, ln2, mlp, with the residual additions written in
// its forward), a final norm and the head over 256 bytes. Its parameter paths read like nanoGPT's:
// blocks.2.attn.qkv.weight. Metrics: the loss (nats per byte), bpb (bits per byte), ppl
// (perplexity per byte) and unigram_bpb, the bits per byte of the split under the training text's
// byte frequencies: the baseline the model must beat.
#include <nitro/main.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tiny_lm {

namespace nn = nitro::nn;

// One pre-LN transformer block: x + attn(ln1(x)), then h + mlp(ln2(h)).
template <int Width>
struct Block {
  static constexpr int heads = Width / 64;
  nn::layer_norm_layer<Width> ln1;
  nn::causal_self_attention_layer<Width, heads> attn;
  nn::layer_norm_layer<Width> ln2;
  nn::chain_layer<nn::dense_layer<Width, 4 * Width, nn::gelu_t>, nn::dense_layer<4 * Width, Width>> mlp;
  template <class Net, class X> auto forward(Net& net, X const& x) const {
    auto h = x + nn::call<"attn">(net, nn::call<"ln1">(net, x));
    return h + nn::call<"mlp">(net, nn::call<"ln2">(net, h));
  }
};
NITRO_MODEL(Block, ln1, attn, ln2, mlp);

inline constexpr std::int64_t max_seq = 1024;  // positions the model holds; seq may be any value up to it

template <int Layers, int Width>
struct Net {
  nn::embedding_layer<256, Width> tok;
  nn::positional_embedding_layer<max_seq, Width> pos;
  nn::repeat_layer<Layers, nn::model_layer<Block<Width>>> blocks;
  nn::layer_norm_layer<Width> ln_f;
  nn::dense_layer<Width, 256> head;
  template <class N, class X> auto forward(N& net, X const& tokens) const {  // tokens [seq, B] -> logits [256, seq, B]
    auto h = nn::call<"blocks">(net, nn::call<"pos">(net, nn::call<"tok">(net, tokens)));
    return nn::call<"head">(net, nn::call<"ln_f">(net, h));
  }
};
NITRO_MODEL(Net, tok, pos, blocks, ln_f, head);

struct Metrics {
  BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, bpb));
};

template <int Layers = 4, int Width = 256>
struct TinyLM {
  nitro::GraphConst<int, Layers> layers;  // compiled in
  nitro::GraphConst<int, Width> width;    // compiled in
  double lr = 0.0015;
  std::int64_t seq = 1024;
  std::string text;                       // empty: Debian's fortunes
  std::int64_t batch_size = 8;            // run keywords read from fields
  std::int64_t max_steps = 120;
  int log_every_n_steps = 10;

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak learning rate of the block matrices, the default group"),
                        nitro::knob<"layers">("transformer blocks"),
                        nitro::knob<"width">("model width"),
                        nitro::knob<"seq">("sequence length in tokens; a window holds seq + 1"),
                        nitro::knob<"text">("a text file to train on (empty: Debian's fortunes)"));
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"width">(128)),
                           nitro::variant<"smoke">(nitro::set<"layers">(2), nitro::set<"width">(128), nitro::set<"seq">(64)));
  }
  static constexpr auto sweeps() { return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3))); }

  nitro::data::text_options text_options() const { return {.file = text, .seq = seq, .knob = "text"}; }
  auto build_data() const { return nitro::data::text_windows(text_options()); }
  auto build_model() const { return nn::model(Net<Layers, Width>{}); }
  auto forward(auto const& model, auto const& ps, auto const& st, nitro::data::tokens_in const& in) const {
    return model(in.tokens, ps, st);
  }
  auto loss(nitro::Tensor const& logits, nitro::data::targets_in const& in) const {
    return nn::logitcrossentropy(logits, in.targets);  // the mean over every token of the batch, in nats
  }
  auto metrics(nitro::Tensor const& logits, nitro::data::targets_in const& in) const {
    const double tokens = double(in.targets.numel());
    // the batch's bits, a tensor where the logits are: on a GPU they add up there, read once per split
    return Metrics{.bpb = {nn::logitcrossentropy(logits, in.targets) * float(tokens / std::log(2.0)), tokens}};
  }
  void finalize_metrics(nitro::metric_values& m, std::string_view split) const {
    m.scalars["ppl"] = std::exp(m.at("bpb") * std::log(2.0));
    m.scalars["unigram_bpb"] = unigram_bpb(split);
  }

  // ---- the optimizer: AdamW, warm-up then cosine; embeddings at half the rate; no decay but the blocks' and head's
  auto optimizer() const { return nitro::optim::adamw({.beta2 = 0.95, .lambda = 0.1}); }
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::warmup_cosine(lr, 10, {.min = 0.1 * lr})}; }
  auto param_group(auto kp) const {
    constexpr std::string_view p = kp.view();
    if constexpr (p.starts_with("tok.") || p.starts_with("pos.")) return nitro::group<"embed">{};
    else if constexpr (p.starts_with("ln_f.") || p.find(".ln1.") != p.npos || p.find(".ln2.") != p.npos) return nitro::group<"norms">{};
    else return nitro::group<"default">{};
  }
  double learning_rate(nitro::group<"embed">) const { return 0.5 * lr; }
  double lambda(nitro::group<"embed">) const { return 0.0; }
  double lambda(nitro::group<"norms">) const { return 0.0; }

  // The unigram baseline of a split, computed once per corpus.
  double unigram_bpb(std::string_view split) const {
    static std::mutex mutex;
    static std::map<std::string, nitro::data::text_corpus> corpora;
    std::lock_guard<std::mutex> lock(mutex);
    const auto opt = text_options();
    auto it = corpora.find(opt.key());
    if (it == corpora.end()) it = corpora.emplace(opt.key(), nitro::data::read_text_corpus(opt)).first;
    auto const& c = it->second;
    return nitro::data::unigram_bits_per_byte(c.train, split == "train" ? c.train : split == "valid" ? c.valid : c.test);
  }
};
NITRO_EXPERIMENT(TinyLM, layers, width, lr, seq, text, batch_size, max_steps, log_every_n_steps);

}  // namespace tiny_lm

#ifndef NITRO_TINY_LM_NO_MAIN
int main(int argc, char** argv) { return nitro::main<tiny_lm::TinyLM<4, 256>, tiny_lm::TinyLM<2, 128>>(argc, argv); }
#endif
