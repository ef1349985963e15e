// The encoder-decoder Transformer, equal to torch.nn.Transformer (batch_first) with
// embeddings scaled by sqrt(D), sinusoidal positions, and an output projection.
//
// Dimension legend: B batch, S source length, T target length, D model width, V vocabulary.
//
// Pre-norm layer (default):  x = x + Dropout(Sublayer(LayerNorm(x)))
// Post-norm layer (paper):   x = LayerNorm(x + Dropout(Sublayer(x)))
// Both stacks end with a final LayerNorm, as torch.nn.Transformer's do.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rosetta/core/lifetime.h"
#include "rosetta/nn/attention.h"
#include "rosetta/nn/containers.h"

namespace rosetta::nn {

// One option of TransformerOptions, as its metadata, validation and a command line see it.
struct OptionField {
  enum Check {
    none,
    positive,
    probability,             // in [0, 1)
    probability_or_dropout,  // < 1; negative: unset, i.e. the same as dropout
  };
  const char* key;          // metadata "model.<key>"; a command line's --<key, '_' as '-'>
  const char* description;  // for a command line's help; an enum's choices are its words (enum_names)
  Check check = none;
};

struct TransformerOptions {
  ROSETTA_ARG(int64_t, src_vocab) = 8000;
  ROSETTA_ARG(int64_t, tgt_vocab) = 8000;
  ROSETTA_ARG(int64_t, d_model) = 256;
  ROSETTA_ARG(int64_t, heads) = 4;
  ROSETTA_ARG(int64_t, ff) = 1024;
  ROSETTA_ARG(int64_t, encoder_layers) = 3;
  ROSETTA_ARG(int64_t, decoder_layers) = 3;
  ROSETTA_ARG(double, dropout) = 0.1;             // residual and embedding dropout
  ROSETTA_ARG(double, attention_dropout) = -1;    // on attention probabilities; < 0: dropout
  ROSETTA_ARG(double, activation_dropout) = -1;   // after the feed-forward activation; < 0: dropout
  ROSETTA_ARG(bool, norm_first) = true;           // pre-norm; false = post-norm
  ROSETTA_ARG(Activation, activation) = Activation::relu;
  ROSETTA_ARG(bool, share_embeddings) = false;    // one table for source and target
  ROSETTA_ARG(bool, tie_output) = false;          // output projection = target embedding
  ROSETTA_ARG(int64_t, max_len) = 1024;           // longest sequence (positional table)
  ROSETTA_ARG(int32_t, pad_id) = 0;
  ROSETTA_ARG(double, layer_norm_eps) = 1e-5;

 public:
  // Calls f(field, OptionField) for every option above, in this order: the one list that
  // validate(), the metadata round trip and `rosetta train`'s flags and TOML keys are written
  // from. Self is TransformerOptions or const TransformerOptions.
  template <class Self, class F>
  static void for_each_field(Self& o, F&& f) {
    using C = OptionField;
    f(o.src_vocab_, C{"src_vocab", "source vocabulary size", C::positive});
    f(o.tgt_vocab_, C{"tgt_vocab", "target vocabulary size", C::positive});
    f(o.d_model_, C{"d_model", "model width", C::positive});
    f(o.heads_, C{"heads", "attention heads", C::positive});
    f(o.ff_, C{"ff", "feed-forward width", C::positive});
    f(o.encoder_layers_, C{"encoder_layers", "encoder layers", C::positive});
    f(o.decoder_layers_, C{"decoder_layers", "decoder layers", C::positive});
    f(o.dropout_, C{"dropout", "dropout probability (residual connections and embeddings)", C::probability});
    f(o.attention_dropout_,
      C{"attention_dropout", "dropout on attention probabilities (< 0: dropout)", C::probability_or_dropout});
    f(o.activation_dropout_, C{"activation_dropout", "dropout after the feed-forward activation (< 0: dropout)",
                               C::probability_or_dropout});
    f(o.norm_first_, C{"norm_first", "pre-norm (true) or post-norm, as the paper (false)"});
    f(o.activation_, C{"activation", "relu or gelu"});
    f(o.share_embeddings_,
      C{"share_embeddings", "one embedding table for source and target (needs equal vocabularies)"});
    f(o.tie_output_, C{"tie_output", "output projection = target embedding"});
    f(o.max_len_, C{"max_len", "longest sequence the model accepts", C::positive});
    f(o.pad_id_, C{"pad_id", "id of the padding token"});
    f(o.layer_norm_eps_, C{"layer_norm_eps", "epsilon of the layer norms", C::positive});
  }

  // Throws a clear error for any invalid combination (e.g. d_model not divisible by heads),
  // naming options "model option d_model"; `name`, if given, names them instead (a command
  // line: "--d-model").
  void validate(const std::function<std::string(const std::string& key)>& name = {}) const;
  // The dropout probabilities the layers use: attention_dropout / activation_dropout, or
  // dropout when those are unset (negative).
  double attention_dropout_p() const {
    return attention_dropout() < 0 ? dropout() : attention_dropout();
  }
  double activation_dropout_p() const {
    return activation_dropout() < 0 ? dropout() : activation_dropout();
  }
  // Round trip through string metadata (checkpoint headers), "model.<key>". attention_dropout
  // and activation_dropout are written resolved (the _p values); metadata without them (older
  // checkpoints) leaves them unset.
  std::map<std::string, std::string> to_metadata() const;
  static TransformerOptions from_metadata(const std::map<std::string, std::string>& meta);
};

class EncoderLayer : public Module {
 public:
  EncoderLayer(const TransformerOptions& o, std::shared_ptr<Generator> dropout_gen,
               Generator& init_gen);
  // x [B, S, D]; mask: source key padding. self_weights, if given, receives the
  // self-attention probabilities [B, H, S, S].
  Var forward(const Var& x, const Tensor& mask, Tensor* self_weights = nullptr) const;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<FeedForward> ff;

 private:
  bool norm_first_;
  std::shared_ptr<Dropout> dropout_;
};

// Cached keys and values of one decoder layer during incremental decoding. Rows are shared:
// a beam reads its prefix's keys where they were written (DecoderState::self_index says which
// rows), and every beam of a sentence reads its source's keys, so following beams copies
// indices, never keys.
struct LayerCache {
  Tensor self_k, self_v;    // [capacity, H, Dh]: each step appends one row per beam
  Tensor cross_k, cross_v;  // [B0 * S, H, Dh]: the keys of start()'s sources, computed once
};

// State of incremental (step-by-step) decoding for a batch.
struct DecoderState {
  std::vector<LayerCache> layers;
  int64_t length = 0;  // target positions decoded so far
  int64_t max_len = 0;  // the most positions a row can decode
  int64_t cache_rows = 0;  // rows of every layer's self_k / self_v written so far
  std::vector<int32_t> sources;  // [B]: the row of start()'s source that each row decodes
  Tensor self_index;   // I32 [B, max_len]: row r's keys at position p < length are row [r, p] of self_k
  Tensor cross_index;  // I32 [B, S]: row r's source keys in cross_k, -1 where the source is padding
  int64_t batch() const { return int64_t(sources.size()); }
  // Keeps rows `index` (I32 [B']) of the batch, e.g. to follow beams or drop finished rows:
  // copies their rows of self_index and cross_index, not keys or values.
  void select(const Tensor& index);
};

class DecoderLayer : public Module {
 public:
  DecoderLayer(const TransformerOptions& o, std::shared_ptr<Generator> dropout_gen,
               Generator& init_gen);
  // x [B, T, D], memory [B, S, D]; self_mask: causal (+ target padding); cross_mask: source
  // padding. cross_weights / self_weights, if given, receive the cross-attention [B, H, T, S]
  // and self-attention [B, H, T, T] probabilities.
  Var forward(const Var& x, const Var& memory, const Tensor& self_mask, const Tensor& cross_mask,
              Tensor* cross_weights = nullptr, Tensor* self_weights = nullptr) const;
  // One step of layer `layer`: x [B, 1, D] at position state.length, its keys and values
  // appended at rows [state.cache_rows, + B) of the layer's cache (Transformer::step moves
  // both on after the last layer). cross_weights, if given, receives [B, H, 1, S].
  Var step(const Var& x, DecoderState& state, size_t layer, Tensor* cross_weights = nullptr) const;
  // The source's keys and values from the encoder output memory [B0, S, D]; no target rows yet.
  void init_cache(LayerCache& cache, const Var& memory) const;

  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<FeedForward> ff;

 private:
  bool norm_first_;
  std::shared_ptr<Dropout> dropout_;
};

class Encoder : public Module {
 public:
  Encoder(const TransformerOptions& o, std::shared_ptr<Generator> dropout_gen, Generator& init_gen);
  Var forward(const Var& x, const Tensor& mask) const;
  std::shared_ptr<ModuleListOf<EncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

class Decoder : public Module {
 public:
  Decoder(const TransformerOptions& o, std::shared_ptr<Generator> dropout_gen, Generator& init_gen);
  Var forward(const Var& x, const Var& memory, const Tensor& self_mask, const Tensor& cross_mask,
              Tensor* last_cross_weights = nullptr) const;
  std::shared_ptr<ModuleListOf<DecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

class Transformer : public Module {
 public:
  // Weights are drawn from init_gen; dropout draws from its own generator, seeded from it.
  Transformer(const TransformerOptions& options, Generator& init_gen);

  // src [B, S], tgt_in [B, T] token ids (I32) -> logits [B, T, V]. Padding masks come from
  // pad_id; the decoder is causal.
  Var forward(const Tensor& src, const Tensor& tgt_in) const;
  // The encoder output [B, S, D].
  Var encode(const Tensor& src) const;
  // Decoder hidden states [B, T, D] after the final norm; cross_weights receives the last
  // layer's cross-attention [B, H, T, S].
  Var decode(const Tensor& tgt_in, const Var& memory, const Tensor& src_mask,
             Tensor* cross_weights = nullptr) const;
  Var project(const Var& hidden) const;  // [.., D] -> [.., V]
  // The training loss of forward(src, tgt_in) against tgt_out [B, T]: cross_entropy(logits,
  // tgt_out, label_smoothing, ignore_index), as linear_cross_entropy takes it (under bf16
  // products without ever holding the logits [B, T, V] whole).
  Var loss(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
           int32_t ignore_index) const;

  // The attention probabilities of every layer for src [B, S] and tgt_in [B, T] (teacher
  // forced), for inspection: one tensor per layer, [B, H, rows, keys]. Call in eval mode (no
  // dropout on the probabilities) under NoGradGuard.
  struct AttentionWeights {
    std::vector<Tensor> encoder_self;   // [B, H, S, S]
    std::vector<Tensor> decoder_self;   // [B, H, T, T]
    std::vector<Tensor> decoder_cross;  // [B, H, T, S]
  };
  AttentionWeights attention_weights(const Tensor& src, const Tensor& tgt_in) const;

  // Incremental decoding (call under NoGradGuard): start from the source, then feed one
  // token per row per step and get that step's logits [B, V].
  DecoderState start(const Tensor& src, int64_t max_len) const;
  Var step(DecoderState& state, const Tensor& tokens, Tensor* cross_weights = nullptr) const;

  const TransformerOptions& options() const ROSETTA_LIFETIMEBOUND { return options_; }
  Generator& dropout_generator() ROSETTA_LIFETIMEBOUND { return *dropout_gen_; }

  std::shared_ptr<Embedding> src_embed, tgt_embed;  // the same object when shared
  std::shared_ptr<SinusoidalPositionalEncoding> pos;
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Module> out_proj;  // Linear, or a bias-only module when tied
  Var out_weight, out_bias;          // [V, D], [V]

 private:
  Var embed(const Embedding& table, const Tensor& ids, int64_t start) const;
  Var hidden(const Tensor& src, const Tensor& tgt_in) const;  // decode(tgt_in, encode(src), ...)
  TransformerOptions options_;
  std::shared_ptr<Generator> dropout_gen_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace rosetta::nn
