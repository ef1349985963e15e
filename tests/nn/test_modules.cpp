// Module system, layers, attention masks, checkpoints and incremental decoding.
#include <cmath>
#include <filesystem>
#include <limits>

#include "rosetta/core/cpu.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;
using rosetta::test::AllClose;

namespace {
TransformerOptions tiny() {
  return TransformerOptions()
      .src_vocab(17)
      .tgt_vocab(19)
      .d_model(16)
      .heads(4)
      .ff(24)
      .encoder_layers(2)
      .decoder_layers(2)
      .dropout(0.0)
      .max_len(32);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("rosetta_nn_" + name)).string();
}

Tensor ids(const std::vector<int32_t>& v, int64_t B, int64_t T) {
  return Tensor::from_vector(v, {B, T});
}
}  // namespace

TEST_CASE("named parameters have dotted, ordered names", "[nn]") {
  Generator g(1);
  Transformer m(tiny(), g);
  const auto named = m.named_parameters();
  std::vector<std::string> names;
  for (const auto& [n, _] : named) names.push_back(n);
  REQUIRE(names.front() == "src_embed.weight");
  REQUIRE(std::find(names.begin(), names.end(), "decoder.layers.1.cross_attn.q_proj.weight") !=
          names.end());
  REQUIRE(std::find(names.begin(), names.end(), "encoder.layers.0.ff.linear2.bias") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "encoder.norm.weight") != names.end());
  REQUIRE(names.back() == "out_proj.bias");
  // Count: embeddings + per-layer weights + final norms + output projection.
  const int64_t D = 16, F = 24, V1 = 17, V2 = 19;
  const int64_t attn = 4 * (D * D + D), ln = 2 * D, ffn = D * F + F + F * D + D;
  const int64_t enc = 2 * (attn + 2 * ln + ffn) + ln;
  const int64_t dec = 2 * (2 * attn + 3 * ln + ffn) + ln;
  REQUIRE(m.parameter_count() == V1 * D + V2 * D + enc + dec + D * V2 + V2);
  // The positional table is a non-persistent buffer: not in the state dict.
  for (const auto& [n, _] : m.state_dict()) REQUIRE(n.find("pos") == std::string::npos);
}

TEST_CASE("tied weights are listed once and get both gradients", "[nn]") {
  Generator g(2);
  Transformer m(tiny().tgt_vocab(17).share_embeddings(true).tie_output(true), g);
  int shared = 0;
  for (const auto& [n, v] : m.named_parameters()) {
    REQUIRE(n != "out_proj.weight");
    shared += n == "shared_embed.weight";
  }
  REQUIRE(shared == 1);
  REQUIRE(m.out_weight.same(m.src_embed->weight));
  REQUIRE(m.src_embed == m.tgt_embed);
}

TEST_CASE("train and eval propagate to children, zero_grad clears", "[nn]") {
  Generator g(3);
  Transformer m(tiny().dropout(0.5), g);
  m.eval();
  REQUIRE_FALSE(m.decoder->layers->at(1)->ff->is_training());
  const Tensor src = ids({5, 6, 7, 0}, 1, 4), tgt = ids({2, 8, 9}, 1, 3);
  // In eval mode dropout is off: two forwards agree.
  REQUIRE_THAT(m.forward(src, tgt).data(), AllClose(m.forward(src, tgt).data(), 0, 0));
  m.train();
  REQUIRE(m.encoder->layers->at(0)->self_attn->is_training());
  // In train mode they differ (dropout 0.5).
  REQUIRE(rosetta::test::closeness(m.forward(src, tgt).data(), m.forward(src, tgt).data(), 0, 1e-6) > 1);
  sum(m.forward(src, tgt)).backward();
  REQUIRE(m.src_embed->weight.grad().defined());
  m.zero_grad();
  for (const auto& v : m.parameters()) REQUIRE_FALSE(v.grad().defined());
}

TEST_CASE("options are validated with clear errors", "[nn]") {
  Generator g(4);
  REQUIRE_THROWS_WITH(Transformer(tiny().d_model(30).heads(4), g),
                      Catch::Contains("d_model 30 is not divisible by heads 4"));
  REQUIRE_THROWS_WITH(Transformer(tiny().ff(0), g), Catch::Contains("ff must be positive"));
  REQUIRE_THROWS_WITH(Transformer(tiny().dropout(1.0), g), Catch::Contains("dropout"));
  REQUIRE_THROWS_WITH(Transformer(tiny().share_embeddings(true), g),
                      Catch::Contains("equal vocabularies"));
  const auto meta = tiny().to_metadata();
  const TransformerOptions back = TransformerOptions::from_metadata(meta);
  REQUIRE(back.to_metadata() == meta);
  auto bad = meta;
  bad["model.heads"] = "four";
  REQUIRE_THROWS_WITH(TransformerOptions::from_metadata(bad), Catch::Contains("model.heads"));
  bad.erase("model.heads");
  REQUIRE_THROWS_WITH(TransformerOptions::from_metadata(bad), Catch::Contains("no model.heads"));
  // The activation is an enum: a word it does not know is named, with the choices.
  bad = meta;
  bad["model.activation"] = "swish";
  REQUIRE_THROWS_WITH(TransformerOptions::from_metadata(bad),
                      Catch::Equals("checkpoint: model.activation: unknown activation 'swish' (relu or gelu)"));
}

TEST_CASE("checkpoints round-trip and report every mismatch by name", "[nn]") {
  Generator g(5);
  Transformer a(tiny(), g), b(tiny(), g);
  const std::string path = temp_path("ckpt.safetensors");
  a.save(path, a.options().to_metadata());
  const auto meta = b.load(path);
  REQUIRE(meta.at("model.d_model") == "16");
  const auto sa = a.state_dict(), sb = b.state_dict();
  for (size_t i = 0; i < sa.size(); ++i) REQUIRE_THAT(sb[i].second, AllClose(sa[i].second, 0, 0));

  Transformer wide(tiny().ff(32), g);
  try {
    wide.load(path);
    FAIL("loading a different architecture must throw");
  } catch (const Error& e) {
    const std::string msg = e.what();
    REQUIRE_THAT(msg, Catch::Contains(path));
    REQUIRE_THAT(msg, Catch::Contains("encoder.layers.0.ff.linear1.weight has shape [24, 16], expected [32, 16]"));
    REQUIRE_THAT(msg, Catch::Contains("decoder.layers.1.ff.linear2.weight"));
  }
  Transformer shallow(tiny().encoder_layers(1), g);
  REQUIRE_THROWS_WITH(shallow.load(path), Catch::Contains("unexpected encoder.layers.1"));
  std::filesystem::remove(path);
}

TEST_CASE("layers: linear init, embedding padding, positional encoding, layer norm", "[nn]") {
  Generator g(6);
  Linear lin(LinearOptions(30, 20), g);
  const double bound = std::sqrt(6.0 / 50);
  for (float w : lin.weight.data().to_vector<float>()) REQUIRE(std::abs(w) <= bound);
  REQUIRE(sum_all(unary(UnaryOp::abs, lin.bias.data())).item() == 0);
  Linear nob(LinearOptions(3, 2).bias(false), g);
  REQUIRE_FALSE(nob.bias.defined());
  REQUIRE(nob.named_parameters().size() == 1);

  Embedding emb(EmbeddingOptions(5, 4).padding_idx(0), g);
  REQUIRE(sum_all(unary(UnaryOp::abs, emb.weight.data().select(0, 0))).item() == 0);
  sum(emb.forward(ids({0, 1, 0, 2}, 2, 2))).backward();
  REQUIRE(emb.weight.grad().at({0, 0}) == 0);
  REQUIRE(emb.weight.grad().at({1, 0}) == 1);

  SinusoidalPositionalEncoding pe(8, 50);
  const Tensor r = pe.rows(0, 50);
  REQUIRE_THAT(r.at({7, 2}), Catch::Matchers::WithinAbs(std::sin(7 / std::pow(10000.0, 2.0 / 8)), 1e-6));
  REQUIRE_THAT(r.at({7, 3}), Catch::Matchers::WithinAbs(std::cos(7 / std::pow(10000.0, 2.0 / 8)), 1e-6));
  REQUIRE(r.at({0, 1}) == 1);
  REQUIRE_THROWS_WITH(pe.rows(45, 10), Catch::Contains("maximum length 50"));

  LayerNorm ln(6);
  const Var y = ln.forward(Var(g.normal({3, 6}, 4, 3)));
  const Tensor mu = mean(y.data(), 1);
  for (float m : mu.to_vector<float>()) REQUIRE(std::abs(m) < 1e-5);
}

TEST_CASE("attention respects padding and causal masks", "[nn]") {
  Generator g(7);
  MultiHeadAttention mha(8, 2, 0.0, std::make_shared<Generator>(0), g);
  const Var x(g.normal({2, 4, 8}));
  const Tensor src = ids({5, 6, 0, 0, 7, 8, 9, 0}, 2, 4);
  const Tensor mask = combine_masks(causal_mask(4), key_padding_mask(src, 0));
  REQUIRE(mask.shape() == Shape{2, 1, 4, 4});
  Tensor w;
  mha.forward(x, x, mask, &w);
  REQUIRE(w.shape() == Shape{2, 2, 4, 4});
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t) {
        double rowsum = 0;
        for (int s = 0; s < 4; ++s) {
          const double p = w.at({b, h, t, s});
          rowsum += p;
          if (s > t || src.at({b, s}) == 0) REQUIRE(p == 0);
        }
        REQUIRE_THAT(rowsum, Catch::Matchers::WithinAbs(1.0, 1e-5));
      }
  // Changing a masked (padded) key does not change any output.
  Tensor x2 = x.data().clone();
  x2.select(0, 0).select(0, 3).fill_(100);
  const Tensor kp = key_padding_mask(src, 0);
  const Var y1 = mha.forward(x, x, kp), y2 = mha.forward(x, Var(x2), kp);
  REQUIRE_THAT(y2.data().select(0, 0), AllClose(y1.data().select(0, 0), 1e-5, 1e-6));
}

// The full pass drops a padding mask that hides nothing (a batch without padding, the second
// source); the decoder state keeps it: both must agree.
TEST_CASE("incremental decoding equals the full forward pass", "[nn]") {
  for (bool norm_first : {true, false})
  for (const Tensor& src : {ids({5, 6, 7, 8, 0, 9, 10, 11, 12, 13}, 2, 5),
                            ids({5, 6, 7, 8, 4, 9, 10, 11, 12, 13}, 2, 5)}) {
    Generator g(8);
    Transformer m(tiny().norm_first(norm_first), g);
    m.eval();
    const Tensor tgt = ids({2, 4, 5, 6, 7, 8, 2, 9, 10, 11, 12, 13}, 2, 6);
    NoGradGuard ng;
    const Tensor full = m.forward(src, tgt).data();  // [2, 6, V]
    DecoderState st = m.start(src, 8);
    for (int64_t t = 0; t < 6; ++t) {
      const Tensor step = m.step(st, tgt.select(1, t).contiguous()).data();  // [2, V]
      INFO("norm_first " << norm_first << " step " << t);
      REQUIRE_THAT(step, AllClose(full.select(1, t).contiguous(), 1e-4, 1e-5));
    }
    REQUIRE(st.length == 6);
  }
}

TEST_CASE("decoder state follows reordered beams", "[nn]") {
  Generator g(9);
  Transformer m(tiny(), g);
  m.eval();
  NoGradGuard ng;
  const Tensor src = ids({5, 6, 7, 9, 10, 11}, 2, 3);
  DecoderState st = m.start(src, 6);
  m.step(st, Tensor::from_vector(std::vector<int32_t>{2, 2}));
  // Swap the two rows and feed row 1's next token to row 0: must match decoding row 1 alone.
  st.select(Tensor::from_vector(std::vector<int32_t>{1, 0}));
  const Tensor swapped = m.step(st, Tensor::from_vector(std::vector<int32_t>{4, 5})).data();
  DecoderState solo = m.start(src.narrow(0, 1, 1).contiguous(), 6);
  m.step(solo, Tensor::from_vector(std::vector<int32_t>{2}));
  const Tensor alone = m.step(solo, Tensor::from_vector(std::vector<int32_t>{4})).data();
  REQUIRE_THAT(swapped.narrow(0, 0, 1), AllClose(alone, 1e-4, 1e-5));
  REQUIRE_THROWS_AS(m.step(st, Tensor::from_vector(std::vector<int32_t>{4})), Error);
}

TEST_CASE("Transformer::loss is cross_entropy of forward: the same bits in fp32, within bf16 rounding in bf16", "[nn]") {
  // A tied model with padding (ignored targets), dropout on: the two paths draw the same masks.
  const auto options = TransformerOptions()
                           .src_vocab(300)
                           .tgt_vocab(300)
                           .d_model(64)
                           .heads(4)
                           .ff(128)
                           .encoder_layers(1)
                           .decoder_layers(1)
                           .dropout(0.1)
                           .share_embeddings(true)
                           .tie_output(true)
                           .max_len(64);
  Generator g(9);
  const Tensor src = g.randint({8, 20}, 1, 300), tgt_in = g.randint({8, 24}, 1, 300);
  std::vector<int32_t> out = g.randint({8, 24}, 1, 300).to_vector<int32_t>();
  for (size_t i = 0; i < out.size(); i += 5) out[i] = 0;  // padding
  const Tensor tgt_out = Tensor::from_vector(out, {8, 24});
  for (const Precision p : {Precision::fp32, Precision::bf16}) {
    if (p == Precision::bf16 && !bf16_supported()) continue;
    INFO(precision_name(p));
    const MatmulPrecisionScope scope(p);
    std::vector<Tensor> grads[2];
    double losses[2];
    for (int path = 0; path < 2; ++path) {
      Generator init(4);
      Transformer m(options, init);
      m.train();
      const Var loss = path == 0 ? m.loss(src, tgt_in, tgt_out, 0.1, 0)
                                 : cross_entropy(m.forward(src, tgt_in), tgt_out, 0.1, 0);
      loss.backward();
      losses[path] = loss.item();
      for (const Var& v : m.parameters()) grads[path].push_back(v.grad().clone());
    }
    if (p == Precision::fp32) {
      REQUIRE(losses[0] == losses[1]);
      for (size_t i = 0; i < grads[0].size(); ++i)
        REQUIRE(grads[0][i].to_vector<float>() == grads[1][i].to_vector<float>());
    } else {
      REQUIRE(losses[0] == Approx(losses[1]).epsilon(1e-6));
      // Per tensor, the largest difference against the largest gradient: bf16 products either way,
      // the logits' gradient rounded before its scale or after it.
      for (size_t i = 0; i < grads[0].size(); ++i) {
        const std::vector<float> a = grads[0][i].to_vector<float>(), b = grads[1][i].to_vector<float>();
        double scale = 0, worst = 0;
        for (size_t j = 0; j < a.size(); ++j) {
          scale = std::max(scale, std::abs(double(b[j])));
          worst = std::max(worst, std::abs(double(a[j]) - b[j]));
        }
        CHECK(worst <= 0.02 * scale + 1e-8);  // + a floor: keys' biases get ~0 (softmax ignores a shift)
      }
    }
  }
}
