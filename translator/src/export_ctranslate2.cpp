// A rosetta translator as a CTranslate2 model directory.
//
// model.bin, as CTranslate2 4.x reads it (its python/ctranslate2/specs/model_spec.py writes it;
// every integer little-endian):
//   u32 binary version (6) | string spec name ("TransformerSpec") | u32 spec revision (7)
//   u32 variable count, then per variable, sorted by name:
//     string name | u8 rank | u32 dims[rank] | u8 type (0 float32, 1 int8, 2 int16, 3 int32)
//     | u32 byte count | the bytes (row-major)
//   u32 alias count, then per alias: string alias | string name of the variable it stands for
//   where a string is u16 length (with the NUL) | its bytes | NUL.
// Variable names are the TransformerSpec's attributes joined by '/', a list's items as name_i:
// "decoder/layer_0/attention/linear_1/weight". Scalars (the head count, flags) are variables of
// rank 0. The mapping from rosetta's tensors is in docs/export.md.
#include "rosetta/translator/export.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "rosetta/core/io.h"

namespace rosetta::translator {

namespace fs = std::filesystem;

namespace {

// CTranslate2's DataType ids (include/ctranslate2/types.h).
enum Ct2Type : uint8_t { f32 = 0, i8 = 1, i16 = 2 };

struct Variable {
  std::vector<uint32_t> shape;
  Ct2Type type;
  std::string bytes;
};

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The variables of a TransformerSpec as they are set, then written as model.bin.
class Ct2Model {
 public:
  void scalar_i8(const std::string& name, int8_t v) { vars_[name] = {{}, i8, bytes_of(std::vector<int8_t>{v})}; }
  void scalar_i16(const std::string& name, int16_t v) { vars_[name] = {{}, i16, bytes_of(std::vector<int16_t>{v})}; }
  // A float32 tensor: `rows` of `values.size() / rows` (rank 2), or one row (rank 1).
  void floats(const std::string& name, const std::vector<float>& values, int64_t rows = 0) {
    std::vector<uint32_t> shape{uint32_t(values.size())};
    if (rows > 0) shape = {uint32_t(rows), uint32_t(int64_t(values.size()) / rows)};
    vars_[name] = {shape, f32, bytes_of(values)};
  }
  // A weight CTranslate2 may keep quantized (it has a NAME_scale beside it).
  void weight(const std::string& name, const std::vector<float>& values, int64_t rows, Ct2Quantization q) {
    if (q == Ct2Quantization::float32) return floats(name, values, rows);
    // Each row scaled so that its largest magnitude is 127, rounded half to even (numpy's rint).
    const size_t cols = values.size() / size_t(rows);
    std::vector<int8_t> quantized(values.size());
    std::vector<float> scales(static_cast<size_t>(rows));
    for (size_t r = 0; r < size_t(rows); ++r) {
      const float* row = values.data() + r * cols;
      float amax = 0;
      for (size_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
      const float scale = 127.0f / (amax == 0 ? 127.0f : amax);
      scales[r] = scale;
      for (size_t c = 0; c < cols; ++c) quantized[r * cols + c] = int8_t(std::nearbyint(row[c] * scale));
    }
    vars_[name] = {{uint32_t(rows), uint32_t(cols)}, i8, bytes_of(quantized)};
    floats(name + "_scale", scales);
  }
  // `alias` reads the variable `name` (CTranslate2 aliases a quantized weight's scale with it).
  void alias(const std::string& alias_name, const std::string& name) { aliases_[alias_name] = name; }

  std::string serialize() const {
    std::string out;
    auto u8 = [&](uint8_t v) { out.push_back(char(v)); };
    auto u16 = [&](uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); };
    auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
    auto str = [&](const std::string& s) {
      u16(uint16_t(s.size() + 1));
      out += s;
      u8(0);
    };
    static_assert(std::endian::native == std::endian::little, "model.bin is little-endian");
    u32(6);
    str("TransformerSpec");
    u32(7);
    u32(uint32_t(vars_.size()));
    for (const auto& [name, v] : vars_) {  // a std::map: sorted by name, as CTranslate2 writes them
      str(name);
      u8(uint8_t(v.shape.size()));
      for (uint32_t d : v.shape) u32(d);
      u8(v.type);
      u32(uint32_t(v.bytes.size()));
      out += v.bytes;
    }
    u32(uint32_t(aliases_.size()));
    for (const auto& [a, name] : aliases_) {
      str(a);
      str(name);
    }
    return out;
  }

 private:
  std::map<std::string, Variable> vars_;
  std::map<std::string, std::string> aliases_;
};

// The model's tensors by rosetta name; each is taken once, and every one must be.
class Tensors {
 public:
  explicit Tensors(const nn::Transformer& m) {
    for (auto& [name, t] : m.state_dict()) left_[name] = t;
  }
  std::vector<float> take(const std::string& name) {
    const auto it = left_.find(name);
    ROSETTA_CHECK(it != left_.end(), "export: the model has no tensor ", name);
    std::vector<float> v = it->second.contiguous().to_vector<float>();
    left_.erase(it);
    return v;
  }
  // The rows of tensors `names` one after another (a fused projection: [q; k; v]).
  std::vector<float> stacked(const std::vector<std::string>& names) {
    std::vector<float> out;
    for (const std::string& n : names) {
      const std::vector<float> v = take(n);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  void check_all_taken() const {
    ROSETTA_CHECK(left_.empty(), "export: the model's tensor ", left_.begin()->first,
                  " has no place in a CTranslate2 TransformerSpec");
  }

 private:
  std::map<std::string, Tensor> left_;
};

// One CTranslate2 LinearSpec (`dst`/weight, `dst`/bias) from rosetta Linear layers `srcs`
// (fused in this order along the output rows).
void linear(Ct2Model& out, Tensors& in, const std::string& dst, const std::vector<std::string>& srcs,
            Ct2Quantization q) {
  std::vector<std::string> w, b;
  for (const std::string& s : srcs) w.push_back(s + ".weight"), b.push_back(s + ".bias");
  const std::vector<float> bias = in.stacked(b);
  out.weight(dst + "/weight", in.stacked(w), int64_t(bias.size()), q);
  out.floats(dst + "/bias", bias);
}

void layer_norm(Ct2Model& out, Tensors& in, const std::string& dst, const std::string& src) {
  out.floats(dst + "/gamma", in.take(src + ".weight"));
  out.floats(dst + "/beta", in.take(src + ".bias"));
}

void feed_forward(Ct2Model& out, Tensors& in, const std::string& dst, const std::string& layer,
                  const std::string& norm, Ct2Quantization q) {
  layer_norm(out, in, dst + "/layer_norm", layer + "." + norm);
  linear(out, in, dst + "/linear_0", {layer + ".ff.linear1"}, q);
  linear(out, in, dst + "/linear_1", {layer + ".ff.linear2"}, q);
}

// The flags CTranslate2's TransformerEncoderSpec / TransformerDecoderSpec set for a pre-norm
// Transformer with sinusoidal positions given as a table and embeddings scaled by sqrt(D).
void stack_flags(Ct2Model& out, const std::string& stack, const nn::TransformerOptions& o) {
  out.scalar_i16(stack + "/num_heads", int16_t(o.heads()));
  out.scalar_i8(stack + "/pre_norm", 1);
  // CTranslate2's Activation enum: RELU 0, GELU 3 (the exact erf form, as rosetta's).
  out.scalar_i8(stack + "/activation", o.activation() == nn::Activation::gelu ? 3 : 0);
  out.scalar_i8(stack + "/scale_embeddings", 1);
}

// The pieces of a vocabulary by id, as a JSON list (CTranslate2's *_vocabulary.json).
std::string vocabulary_json(const std::vector<std::string>& pieces) {
  return nlohmann::json(pieces).dump(2, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
}

}  // namespace

void export_ctranslate2(const Translator& t, const std::string& out, Ct2Quantization q) {
  const nn::Transformer& m = *t.model;
  const nn::TransformerOptions& o = m.options();
  // What CTranslate2's TransformerSpec cannot compute as rosetta does is refused before writing.
  ROSETTA_CHECK(o.norm_first(), t.weights_path,
                ": a post-norm model (norm_first = false) cannot be exported to CTranslate2: rosetta's "
                "post-norm stacks end with a layer norm, CTranslate2's post-norm Transformer has none");
  ROSETTA_CHECK(o.activation() == nn::Activation::relu || o.activation() == nn::Activation::gelu, t.weights_path,
                ": activation ", nn::activation_name(o.activation()), " has no CTranslate2 equivalent");
  ROSETTA_CHECK(o.heads() <= 32767 && o.max_len() <= int64_t(UINT32_MAX), t.weights_path,
                ": too many heads or positions for CTranslate2's format");
  std::error_code ec;
  ROSETTA_CHECK(!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec)), out,
                fs::is_directory(out, ec) ? " is not empty: give a new or empty directory"
                                          : " exists and is not a directory: give a new or empty directory");
  fs::path target = fs::absolute(out).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "dir/"
  const fs::path parent = target.parent_path();
  ROSETTA_CHECK(fs::is_directory(parent, ec), out, ": its directory ", parent.string(), " does not exist");

  Ct2Model ct2;
  Tensors in(m);
  // Embeddings (scaled by sqrt(D) in both engines) and sinusoidal positions, given as a table:
  // rosetta interleaves sin and cos, CTranslate2's own table puts them in halves.
  const std::string src_table = o.share_embeddings() ? "shared_embed.weight" : "src_embed.weight";
  const std::string tgt_table = o.share_embeddings() ? "shared_embed.weight" : "tgt_embed.weight";
  const std::vector<float> src_embed = in.take(src_table);
  const std::vector<float> tgt_embed = o.share_embeddings() ? src_embed : in.take(tgt_table);
  // A tensor both stacks read is kept once, under its name that sorts first (as CTranslate2 does);
  // the other names are aliases.
  ct2.weight("decoder/embeddings/weight", tgt_embed, o.tgt_vocab(), q);
  if (o.share_embeddings()) ct2.alias("encoder/embeddings_0/weight", "decoder/embeddings/weight");
  else ct2.weight("encoder/embeddings_0/weight", src_embed, o.src_vocab(), q);
  ct2.scalar_i8("encoder/embeddings_merge", 0);
  const std::vector<float> positions = m.pos->rows(0, o.max_len()).contiguous().to_vector<float>();
  ct2.floats("decoder/position_encodings/encodings", positions, o.max_len());
  ct2.alias("encoder/position_encodings/encodings", "decoder/position_encodings/encodings");
  ct2.scalar_i8("encoder/multi_query_attention", 0);
  stack_flags(ct2, "encoder", o);
  for (int64_t i = 0; i < o.encoder_layers(); ++i) {
    const std::string src = "encoder.layers." + std::to_string(i), dst = "encoder/layer_" + std::to_string(i);
    layer_norm(ct2, in, dst + "/self_attention/layer_norm", src + ".norm1");
    linear(ct2, in, dst + "/self_attention/linear_0",
           {src + ".self_attn.q_proj", src + ".self_attn.k_proj", src + ".self_attn.v_proj"}, q);
    linear(ct2, in, dst + "/self_attention/linear_1", {src + ".self_attn.out_proj"}, q);
    feed_forward(ct2, in, dst + "/ffn", src, "norm2", q);
  }
  layer_norm(ct2, in, "encoder/layer_norm", "encoder.norm");

  stack_flags(ct2, "decoder", o);
  ct2.scalar_i16("decoder/alignment_layer", -1);
  ct2.scalar_i16("decoder/alignment_heads", 1);
  ct2.scalar_i8("decoder/alibi", 0);
  ct2.scalar_i8("decoder/alibi_use_positive_positions", 0);
  ct2.scalar_i8("decoder/scale_alibi", 0);
  ct2.scalar_i8("decoder/start_from_zero_embedding", 0);
  for (int64_t i = 0; i < o.decoder_layers(); ++i) {
    const std::string src = "decoder.layers." + std::to_string(i), dst = "decoder/layer_" + std::to_string(i);
    layer_norm(ct2, in, dst + "/self_attention/layer_norm", src + ".norm1");
    linear(ct2, in, dst + "/self_attention/linear_0",
           {src + ".self_attn.q_proj", src + ".self_attn.k_proj", src + ".self_attn.v_proj"}, q);
    linear(ct2, in, dst + "/self_attention/linear_1", {src + ".self_attn.out_proj"}, q);
    layer_norm(ct2, in, dst + "/attention/layer_norm", src + ".norm2");
    linear(ct2, in, dst + "/attention/linear_0", {src + ".cross_attn.q_proj"}, q);
    linear(ct2, in, dst + "/attention/linear_1", {src + ".cross_attn.k_proj", src + ".cross_attn.v_proj"}, q);
    linear(ct2, in, dst + "/attention/linear_2", {src + ".cross_attn.out_proj"}, q);
    feed_forward(ct2, in, dst + "/ffn", src, "norm3", q);
  }
  layer_norm(ct2, in, "decoder/layer_norm", "decoder.norm");
  // The output layer: tied to the target embedding, or a Linear of its own.
  if (o.tie_output()) {
    ct2.alias("decoder/projection/weight", "decoder/embeddings/weight");
  } else {
    ct2.weight("decoder/projection/weight", in.take("out_proj.weight"), o.tgt_vocab(), q);
  }
  ct2.floats("decoder/projection/bias", in.take("out_proj.bias"));
  in.check_all_taken();

  // The vocabularies: one file when both sides hold the same pieces, as CTranslate2 writes them.
  const std::vector<std::string> src_vocab = t.codec.source_vocabulary(), tgt_vocab = t.codec.target_vocabulary();
  ROSETTA_CHECK(int64_t(src_vocab.size()) == o.src_vocab() && int64_t(tgt_vocab.size()) == o.tgt_vocab(),
                t.weights_path, ": the vocabularies do not match the model's embeddings");
  std::map<std::string, std::string> files;
  if (src_vocab == tgt_vocab) {
    files["shared_vocabulary.json"] = vocabulary_json(src_vocab);
  } else {
    files["source_vocabulary.json"] = vocabulary_json(src_vocab);
    files["target_vocabulary.json"] = vocabulary_json(tgt_vocab);
  }
  // config.json: CTranslate2's TransformerConfig, its special tokens the pieces of rosetta's ids.
  const nlohmann::json config = {{"add_source_bos", false},
                                 {"add_source_eos", false},
                                 {"bos_token", tgt_vocab.at(size_t(data::kBosId))},
                                 {"decoder_start_token", tgt_vocab.at(size_t(data::kBosId))},
                                 {"eos_token", tgt_vocab.at(size_t(data::kEosId))},
                                 {"layer_norm_epsilon", o.layer_norm_eps()},
                                 {"multi_query_attention", false},
                                 {"unk_token", tgt_vocab.at(size_t(data::kUnkId))}};
  files["config.json"] = config.dump(2) + "\n";
  files["model.bin"] = ct2.serialize();

  // Written beside `out`, then renamed to it: `out` holds a whole model or nothing new.
  const std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  ROSETTA_CHECK(fs::create_directory(tmp, ec) && !ec, tmp, ": cannot create directory: ", ec.message());
  try {
    for (const auto& [name, bytes] : files) write_file_atomic(tmp + "/" + name, bytes);
    rename_atomic(tmp, target.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace rosetta::translator
