#include "rosetta/nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "rosetta/core/ops.h"
#include "rosetta/core/safetensors.h"

namespace rosetta::nn {

// ------------------------------------------------------------------ options

void TransformerOptions::validate(const std::function<std::string(const std::string&)>& name) const {
  // How a message names the option it is about, and an option it refers to.
  auto subject = [&](const std::string& key) { return name ? name(key) : "model option " + key; };
  auto ref = [&](const std::string& key) { return name ? name(key) : key; };
  for_each_field(*this, [&](const auto& v, const OptionField& f) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (!std::is_same_v<T, bool> && !std::is_enum_v<T>) {
      // NaN fails each check, as it compares false.
      switch (f.check) {
        case OptionField::none: break;
        case OptionField::positive:
          ROSETTA_CHECK(v > 0, subject(f.key), " must be positive, got ", v);
          break;
        case OptionField::probability:
          ROSETTA_CHECK(v >= 0 && v < 1, subject(f.key), " ", v, " outside [0, 1)");
          break;
        case OptionField::probability_or_dropout:
          ROSETTA_CHECK(v < 1, subject(f.key), " ", v, " outside [0, 1)");
          break;
      }
    }
  });
  ROSETTA_CHECK(d_model() % heads() == 0, subject("d_model"), " ", d_model(), " is not divisible by ",
                ref("heads"), " ", heads());
  ROSETTA_CHECK(!share_embeddings() || src_vocab() == tgt_vocab(),
                "shared embeddings need equal vocabularies, got ", src_vocab(), " and ",
                tgt_vocab());
  ROSETTA_CHECK(pad_id() >= 0 && pad_id() < std::min(src_vocab(), tgt_vocab()), subject("pad_id"), " ",
                pad_id(), " outside the vocabulary");
}

std::map<std::string, std::string> TransformerOptions::to_metadata() const {
  std::map<std::string, std::string> meta;
  for_each_field(*this, [&](const auto& v, const OptionField& f) {
    using T = std::decay_t<decltype(v)>;
    std::string& out = meta[std::string("model.") + f.key];
    if constexpr (std::is_enum_v<T>) {
      out = enum_name(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out = v ? "true" : "false";
    } else if constexpr (std::is_floating_point_v<T>) {
      std::ostringstream os;
      os.precision(17);
      os << (f.check == OptionField::probability_or_dropout && v < 0 ? dropout() : v);
      out = os.str();
    } else {
      out = std::to_string(v);
    }
  });
  return meta;
}

TransformerOptions TransformerOptions::from_metadata(const std::map<std::string, std::string>& m) {
  const std::string file = "checkpoint";  // callers put the path in front of errors
  TransformerOptions o;
  for_each_field(o, [&](auto& v, const OptionField& f) {
    using T = std::decay_t<decltype(v)>;
    const std::string key = std::string("model.") + f.key;
    // Absent in checkpoints from before these options: left unset, i.e. the same as dropout.
    if (f.check == OptionField::probability_or_dropout && !m.count(key)) return;
    if constexpr (std::is_enum_v<T> || std::is_same_v<T, bool>) {
      const auto it = m.find(key);
      ROSETTA_CHECK(it != m.end(), file, " has no ", key, " in its metadata");
      if constexpr (std::is_enum_v<T>) {
        try {
          v = parse_enum<T>(it->second);
        } catch (const Error& e) {
          ROSETTA_FAIL(file, ": ", key, ": ", e.what());
        }
      } else {
        ROSETTA_CHECK(it->second == "true" || it->second == "false", file, ": ", key, " = '", it->second,
                      "' is not true or false");
        v = it->second == "true";
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      v = metadata_double(m, key, file);
    } else {
      const int64_t n = metadata_int(m, key, file);
      ROSETTA_CHECK(n == T(n), file, ": ", key, " = ", n, " is out of range");
      v = T(n);
    }
  });
  o.validate();
  return o;
}

// ------------------------------------------------------------------ layers

namespace {
// Pre-norm: x + drop(f(norm(x)));  post-norm: norm(x + drop(f(x))).
template <class F>
Var sublayer(const Var& x, bool norm_first, const LayerNorm& norm, const Dropout& drop, F&& f) {
  if (norm_first) return dropout_add(x, f(norm.forward(x)), drop.p(), drop.generator(), drop.is_training());
  return norm.forward(dropout_add(x, f(x), drop.p(), drop.generator(), drop.is_training()));
}

std::shared_ptr<MultiHeadAttention> make_attention(const TransformerOptions& o,
                                                   std::shared_ptr<Generator> dg, Generator& ig) {
  return std::make_shared<MultiHeadAttention>(o.d_model(), o.heads(), o.attention_dropout_p(),
                                              std::move(dg), ig);
}

std::shared_ptr<FeedForward> make_feed_forward(const TransformerOptions& o,
                                               std::shared_ptr<Generator> dg, Generator& ig) {
  return std::make_shared<FeedForward>(o.d_model(), o.ff(), o.activation(),
                                       o.activation_dropout_p(), std::move(dg), ig);
}
}  // namespace

EncoderLayer::EncoderLayer(const TransformerOptions& o, std::shared_ptr<Generator> dg,
                           Generator& ig)
    : norm_first_(o.norm_first()) {
  self_attn = register_module("self_attn", make_attention(o, dg, ig));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  ff = register_module("ff", make_feed_forward(o, dg, ig));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout(), dg));
}

Var EncoderLayer::forward(const Var& x_in, const Tensor& mask, Tensor* self_weights) const {
  Var x = sublayer(x_in, norm_first_, *norm1, *dropout_,
                   [&](const Var& h) { return self_attn->forward(h, h, mask, self_weights); });
  return sublayer(x, norm_first_, *norm2, *dropout_, [&](const Var& h) { return ff->forward(h); });
}

DecoderLayer::DecoderLayer(const TransformerOptions& o, std::shared_ptr<Generator> dg,
                           Generator& ig)
    : norm_first_(o.norm_first()) {
  self_attn = register_module("self_attn", make_attention(o, dg, ig));
  cross_attn = register_module("cross_attn", make_attention(o, dg, ig));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  ff = register_module("ff", make_feed_forward(o, dg, ig));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout(), dg));
}

Var DecoderLayer::forward(const Var& x_in, const Var& memory, const Tensor& self_mask,
                          const Tensor& cross_mask, Tensor* cross_weights, Tensor* self_weights) const {
  Var x = sublayer(x_in, norm_first_, *norm1, *dropout_,
                   [&](const Var& h) { return self_attn->forward(h, h, self_mask, self_weights); });
  x = sublayer(x, norm_first_, *norm2, *dropout_, [&](const Var& h) {
    return cross_attn->forward(h, memory, cross_mask, cross_weights);
  });
  return sublayer(x, norm_first_, *norm3, *dropout_, [&](const Var& h) { return ff->forward(h); });
}

void DecoderLayer::init_cache(LayerCache& c, const Var& memory) const {
  const int64_t H = cross_attn->heads(), Dh = cross_attn->head_dim();
  const int64_t rows = memory.size(0) * memory.size(1);  // [B0, S, D] as [B0 * S, H, Dh]
  c.cross_k = cross_attn->k_proj->forward(memory).data().contiguous().reshape({rows, H, Dh});
  c.cross_v = cross_attn->v_proj->forward(memory).data().contiguous().reshape({rows, H, Dh});
  c.self_k = c.self_v = Tensor();
}

namespace {
// Appends x ([B, 1, D], contiguous) as rows [at, at + B) of cache ([capacity, H, Dh]), growing
// it (doubling, never past what `steps_left` more steps of B rows need).
void append_rows(Tensor& cache, const Tensor& x, int64_t at, int64_t steps_left, int64_t H, int64_t Dh) {
  const int64_t B = x.shape()[0], need = at + B;
  const int64_t capacity = cache.defined() ? cache.shape()[0] : 0;
  if (need > capacity) {
    const int64_t grown = std::max(need, std::min(2 * capacity, at + B * steps_left));
    Tensor bigger = Tensor::empty({std::max(grown, int64_t(1)), H, Dh});
    if (at > 0) bigger.narrow(0, 0, at).copy_(cache.narrow(0, 0, at));
    cache = bigger;
  }
  cache.narrow(0, at, B).copy_(x.reshape({B, H, Dh}));
}
}  // namespace

Var DecoderLayer::step(const Var& x_in, DecoderState& st, size_t layer, Tensor* cross_weights) const {
  LayerCache& c = st.layers.at(layer);
  const int64_t B = st.batch(), H = self_attn->heads(), Dh = self_attn->head_dim(), pos = st.length;
  const double scale = 1.0 / std::sqrt(double(Dh));
  // q_proj's output [B, 1, D] is the heads [B, H, Dh]; the context [B, H, Dh] is out_proj's input.
  auto heads = [&](const Var& y) { return y.data().contiguous().reshape({B, H, Dh}); };
  Var x = sublayer(x_in, norm_first_, *norm1, *dropout_, [&](const Var& h) {
    // Append this position's key and value, then attend over positions 0..pos of each row.
    append_rows(c.self_k, self_attn->k_proj->forward(h).data().contiguous(), st.cache_rows, st.max_len - pos, H, Dh);
    append_rows(c.self_v, self_attn->v_proj->forward(h).data().contiguous(), st.cache_rows, st.max_len - pos, H, Dh);
    const Tensor ctx = attend_gathered(heads(self_attn->q_proj->forward(h)), c.self_k, c.self_v,
                                       st.self_index.narrow(1, 0, pos + 1), scale);
    return self_attn->out_proj->forward(Var(ctx.reshape({B, 1, H * Dh})));
  });
  x = sublayer(x, norm_first_, *norm2, *dropout_, [&](const Var& h) {
    Tensor weights;
    const Tensor ctx = attend_gathered(heads(cross_attn->q_proj->forward(h)), c.cross_k, c.cross_v, st.cross_index,
                                       scale, cross_weights ? &weights : nullptr);
    if (cross_weights) *cross_weights = weights.reshape({B, H, 1, weights.shape()[2]});
    return cross_attn->out_proj->forward(Var(ctx.reshape({B, 1, H * Dh})));
  });
  return sublayer(x, norm_first_, *norm3, *dropout_, [&](const Var& h) { return ff->forward(h); });
}

Encoder::Encoder(const TransformerOptions& o, std::shared_ptr<Generator> dg, Generator& ig) {
  layers = register_module("layers", std::make_shared<ModuleListOf<EncoderLayer>>());
  for (int64_t i = 0; i < o.encoder_layers(); ++i) layers->push_back(std::make_shared<EncoderLayer>(o, dg, ig));
  norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
}

Var Encoder::forward(const Var& x_in, const Tensor& mask) const {
  Var x = x_in;
  for (const auto& l : *layers) x = l->forward(x, mask);
  return norm->forward(x);
}

Decoder::Decoder(const TransformerOptions& o, std::shared_ptr<Generator> dg, Generator& ig) {
  layers = register_module("layers", std::make_shared<ModuleListOf<DecoderLayer>>());
  for (int64_t i = 0; i < o.decoder_layers(); ++i) layers->push_back(std::make_shared<DecoderLayer>(o, dg, ig));
  norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
}

Var Decoder::forward(const Var& x_in, const Var& memory, const Tensor& self_mask,
                     const Tensor& cross_mask, Tensor* last_cross_weights) const {
  Var x = x_in;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at(i)->forward(x, memory, self_mask, cross_mask,
                               i + 1 == layers->size() ? last_cross_weights : nullptr);
  return norm->forward(x);
}

// ------------------------------------------------------------------ decoder state

namespace {
// Rows `rows` of a [B, n] I32 table, its first `n` columns (the rest are written before read).
Tensor take_index_rows(const Tensor& t, const std::vector<int32_t>& rows, int64_t n) {
  const int64_t width = t.shape()[1];
  Tensor out = Tensor::empty({int64_t(rows.size()), width}, DType::i32);
  const int32_t* src = t.data<int32_t>();
  int32_t* dst = out.data<int32_t>();
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(src + int64_t(rows[i]) * width, n, dst + int64_t(i) * width);
  return out;
}
}  // namespace

void DecoderState::select(const Tensor& index) {
  const std::vector<int32_t> rows = index.to_vector<int32_t>();
  std::vector<int32_t> next_sources(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ROSETTA_CHECK(rows[i] >= 0 && rows[i] < batch(), "decoder state: row ", rows[i], " outside [0, ", batch(), ")");
    next_sources[i] = sources[size_t(rows[i])];
  }
  self_index = take_index_rows(self_index, rows, length);
  cross_index = take_index_rows(cross_index, rows, cross_index.shape()[1]);
  sources = std::move(next_sources);
}

// ------------------------------------------------------------------ the model

namespace {
// The output bias alone, for a projection tied to the target embedding.
class OutputBias : public Module {
 public:
  explicit OutputBias(int64_t vocab) { bias = register_parameter("bias", Tensor::zeros({vocab})); }
  Var bias;
};

// key_padding_mask(ids), or no mask when no id is padding (batches of equal lengths): a mask
// that hides nothing would still send every attention row through the masked softmax.
Tensor padding_mask(const Tensor& ids, int32_t pad) {
  Tensor m = key_padding_mask(ids, pad);
  const int32_t* p = m.data<int32_t>();
  return std::any_of(p, p + m.numel(), [](int32_t v) { return v != 0; }) ? m : Tensor();
}
}  // namespace

Transformer::Transformer(const TransformerOptions& o, Generator& ig) : options_(o) {
  o.validate();
  dropout_gen_ = std::make_shared<Generator>(ig.next_u64());
  const int64_t D = o.d_model();
  if (o.share_embeddings()) {
    src_embed = tgt_embed =
        register_module("shared_embed", std::make_shared<Embedding>(EmbeddingOptions(o.src_vocab(), D), ig));
  } else {
    src_embed = register_module("src_embed", std::make_shared<Embedding>(EmbeddingOptions(o.src_vocab(), D), ig));
    tgt_embed = register_module("tgt_embed", std::make_shared<Embedding>(EmbeddingOptions(o.tgt_vocab(), D), ig));
  }
  pos = register_module("pos", std::make_shared<SinusoidalPositionalEncoding>(D, o.max_len()));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout(), dropout_gen_));
  encoder = register_module("encoder", std::make_shared<Encoder>(o, dropout_gen_, ig));
  decoder = register_module("decoder", std::make_shared<Decoder>(o, dropout_gen_, ig));
  if (o.tie_output()) {
    auto b = std::make_shared<OutputBias>(o.tgt_vocab());
    out_weight = tgt_embed->weight;
    out_bias = b->bias;
    out_proj = register_module("out_proj", b);
  } else {
    auto lin = std::make_shared<Linear>(LinearOptions(D, o.tgt_vocab()), ig);
    out_weight = lin->weight;
    out_bias = lin->bias;
    out_proj = register_module("out_proj", lin);
  }
}

Var Transformer::embed(const Embedding& table, const Tensor& ids, int64_t start) const {
  const int64_t T = ids.shape()[1];
  ROSETTA_CHECK(start + T <= options_.max_len(), "sequence of length ", start + T,
                " exceeds the model's maximum length ", options_.max_len());
  Var e = table.forward(ids) * std::sqrt(double(options_.d_model()));
  e = e + Var(pos->rows(start, T));
  return dropout_->forward(e);
}

Var Transformer::encode(const Tensor& src) const {
  ROSETTA_CHECK(src.dim() == 2 && src.dtype() == DType::i32, "encode: source must be I32 [B, S], got ",
                src.shape());
  return encoder->forward(embed(*src_embed, src, 0), padding_mask(src, options_.pad_id()));
}

Var Transformer::decode(const Tensor& tgt_in, const Var& memory, const Tensor& src_mask,
                        Tensor* cross_weights) const {
  ROSETTA_CHECK(tgt_in.dim() == 2 && tgt_in.dtype() == DType::i32,
                "decode: target must be I32 [B, T], got ", tgt_in.shape());
  const Tensor self_mask =
      combine_masks(causal_mask(tgt_in.shape()[1]), padding_mask(tgt_in, options_.pad_id()));
  return decoder->forward(embed(*tgt_embed, tgt_in, 0), memory, self_mask, src_mask, cross_weights);
}

Var Transformer::project(const Var& hidden) const { return linear(hidden, out_weight, out_bias); }

// encode and decode, layer by layer, keeping every layer's probabilities.
Transformer::AttentionWeights Transformer::attention_weights(const Tensor& src, const Tensor& tgt_in) const {
  ROSETTA_CHECK(src.dim() == 2 && tgt_in.dim() == 2 && src.shape()[0] == tgt_in.shape()[0],
                "attention_weights: source ", src.shape(), " and target ", tgt_in.shape(),
                " must be [B, S] and [B, T]");
  AttentionWeights w;
  const Tensor src_mask = padding_mask(src, options_.pad_id());
  Var x = embed(*src_embed, src, 0);
  for (const auto& layer : *encoder->layers) x = layer->forward(x, src_mask, &w.encoder_self.emplace_back());
  const Var memory = encoder->norm->forward(x);
  const Tensor self_mask =
      combine_masks(causal_mask(tgt_in.shape()[1]), padding_mask(tgt_in, options_.pad_id()));
  Var y = embed(*tgt_embed, tgt_in, 0);
  for (const auto& layer : *decoder->layers)
    y = layer->forward(y, memory, self_mask, src_mask, &w.decoder_cross.emplace_back(),
                       &w.decoder_self.emplace_back());
  return w;
}

Var Transformer::hidden(const Tensor& src, const Tensor& tgt_in) const {
  ROSETTA_CHECK(src.dim() == 2 && tgt_in.dim() == 2 && src.shape()[0] == tgt_in.shape()[0],
                "Transformer: source ", src.shape(), " and target ", tgt_in.shape(),
                " must be [B, S] and [B, T]");
  const Var memory = encode(src);
  return decode(tgt_in, memory, padding_mask(src, options_.pad_id()));
}

Var Transformer::forward(const Tensor& src, const Tensor& tgt_in) const { return project(hidden(src, tgt_in)); }

Var Transformer::loss(const Tensor& src, const Tensor& tgt_in, const Tensor& tgt_out, double label_smoothing,
                      int32_t ignore_index) const {
  return linear_cross_entropy(hidden(src, tgt_in), out_weight, out_bias, tgt_out, label_smoothing, ignore_index);
}

DecoderState Transformer::start(const Tensor& src, int64_t max_len) const {
  ROSETTA_CHECK(max_len > 0 && max_len <= options_.max_len(), "decoding length ", max_len,
                " outside [1, ", options_.max_len(), "]");
  DecoderState st;
  const Var memory = encode(src);
  const int64_t B = src.shape()[0], S = src.shape()[1];
  st.max_len = max_len;
  st.sources.resize(size_t(B));
  std::iota(st.sources.begin(), st.sources.end(), 0);
  st.self_index = Tensor::empty({B, max_len}, DType::i32);
  st.cross_index = Tensor::empty({B, S}, DType::i32);
  const Tensor padding = key_padding_mask(src, options_.pad_id());  // [B, 1, 1, S], contiguous
  const int32_t* pad = padding.data<int32_t>();
  int32_t* ci = st.cross_index.data<int32_t>();
  for (int64_t i = 0; i < B * S; ++i) ci[i] = pad[i] ? -1 : int32_t(i);  // row b's position s: b * S + s
  st.layers.resize(decoder->layers->size());
  for (size_t i = 0; i < st.layers.size(); ++i) decoder->layers->at(i)->init_cache(st.layers[i], memory);
  return st;
}

Var Transformer::step(DecoderState& st, const Tensor& tokens, Tensor* cross_weights) const {
  ROSETTA_CHECK(tokens.dim() == 1 && tokens.shape()[0] == st.batch(), "decoder step: tokens ",
                tokens.shape(), " for a batch of ", st.batch());
  ROSETTA_CHECK(st.length < st.max_len, "decoder: step ", st.length, " beyond the cache length ", st.max_len);
  const int64_t B = st.batch();
  Var x = embed(*tgt_embed, tokens.reshape({B, 1}), st.length);
  // This step's keys go to rows [cache_rows, + B) of every layer's cache, row r's at cache_rows + r.
  int32_t* index = st.self_index.data<int32_t>();
  for (int64_t r = 0; r < B; ++r) index[r * st.max_len + st.length] = int32_t(st.cache_rows + r);
  const size_t n = decoder->layers->size();
  for (size_t i = 0; i < n; ++i)
    x = decoder->layers->at(i)->step(x, st, i, i + 1 == n ? cross_weights : nullptr);
  st.cache_rows += B;
  ++st.length;
  const Var logits = project(decoder->norm->forward(x));
  return reshape(logits, {st.batch(), logits.size(-1)});
}

}  // namespace rosetta::nn
