// Parity with torch.nn.Transformer: load the weights PyTorch used (tests/golden/*.safetensors,
// written by tests/golden/make_golden.py), run forward and backward, and compare logits, loss
// and every parameter gradient. No torch needed at test time.
#include <cmath>

#include "rosetta/core/safetensors.h"
#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;

namespace {

std::string golden(const std::string& name) {
  return std::string(ROSETTA_TEST_DATA) + "/golden/" + name + ".safetensors";
}

// max |a - b| / max |b|: the tensor's relative error.
double rel_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    num = std::max(num, std::abs(va[i] - vb[i]));
    den = std::max(den, std::abs(vb[i]));
  }
  return den > 0 ? num / den : num;
}

const Tensor& need(const SafeTensors& st, const std::string& name) {
  const Tensor* t = st.find(name);
  INFO("golden tensor " << name);
  REQUIRE(t != nullptr);
  return *t;
}

int64_t meta_int(const SafeTensors& st, const std::string& key) {
  return std::stoll(st.metadata.at(key));
}

TransformerOptions options_from_golden(const SafeTensors& st) {
  const bool tie = st.metadata.at("tie") == "true";
  return TransformerOptions()
      .src_vocab(meta_int(st, "src_vocab"))
      .tgt_vocab(std::max<int64_t>(meta_int(st, "tgt_vocab"), 1))
      .d_model(meta_int(st, "d_model"))
      .heads(meta_int(st, "heads"))
      .ff(meta_int(st, "ff"))
      .encoder_layers(meta_int(st, "encoder_layers"))
      .decoder_layers(std::max<int64_t>(meta_int(st, "decoder_layers"), 1))
      .activation(parse_activation(st.metadata.at("activation")))
      .norm_first(st.metadata.at("norm_first") == "true")
      .share_embeddings(tie)
      .tie_output(tie)
      .dropout(0.0)
      .pad_id(int32_t(meta_int(st, "pad_id")));
}

// Loads every parameter of `params` from the file (by the same names) and checks the gradient
// of each against grad.<name>.
void load_params(const std::vector<std::pair<std::string, Var>>& params, const SafeTensors& st) {
  for (const auto& [name, v] : params) {
    Var p = v;
    p.set_data(need(st, name));
  }
}

void check_grads(const std::vector<std::pair<std::string, Var>>& params, const SafeTensors& st) {
  for (const auto& [name, v] : params) {
    INFO("gradient of " << name);
    REQUIRE(v.grad().defined());
    const Tensor& expect = need(st, "grad." + name);
    // The key projection's bias has a gradient of exactly zero in exact arithmetic (softmax
    // ignores a constant added to a whole row of scores); both sides hold rounding noise.
    if (sum_all(unary(UnaryOp::abs, expect)).item() < 1e-6) {
      REQUIRE(sum_all(unary(UnaryOp::abs, v.grad())).item() < 1e-5);
      continue;
    }
    const double err = rel_error(v.grad(), expect);
    CAPTURE(err);
    REQUIRE(err <= 1e-3);
  }
}

void check_seq2seq(const std::string& file) {
  const SafeTensors st = load_safetensors(golden(file));
  Generator g(0);
  Transformer model(options_from_golden(st), g);
  model.load_state_dict([&] {
    NamedTensors sd;
    for (const auto& [name, _] : model.state_dict()) sd.emplace_back(name, need(st, name));
    return sd;
  }());
  model.train();  // dropout is 0: train mode must equal the reference exactly
  const Tensor& src = need(st, "input.src");
  const Tensor& tgt_in = need(st, "input.tgt_in");
  const Tensor& tgt_out = need(st, "input.tgt_out");
  const Var logits = model.forward(src, tgt_in);
  {
    const double err = rel_error(logits.data(), need(st, "output.logits"));
    CAPTURE(err);
    REQUIRE(err <= 1e-4);
  }
  const double smoothing = std::stod(st.metadata.at("label_smoothing"));
  const Var loss = cross_entropy(logits, tgt_out, smoothing, model.options().pad_id());
  const double expect = need(st, "output.loss").item();
  REQUIRE_THAT(loss.item(), Catch::Matchers::WithinRel(expect, 1e-4));
  loss.backward();
  // Every parameter the file has a gradient for (all of ours).
  check_grads(model.named_parameters(), st);
}

}  // namespace

TEST_CASE("parity: encoder only, with source padding", "[parity]") {
  const SafeTensors st = load_safetensors(golden("encoder_only"));
  TransformerOptions o = options_from_golden(st);
  Generator g(0);
  Embedding src_embed(EmbeddingOptions(o.src_vocab(), o.d_model()), g);
  SinusoidalPositionalEncoding pe(o.d_model(), 64);
  Encoder encoder(o, std::make_shared<Generator>(1), g);
  std::vector<std::pair<std::string, Var>> params{{"src_embed.weight", src_embed.weight}};
  for (const auto& [n, v] : encoder.named_parameters()) params.emplace_back("encoder." + n, v);
  load_params(params, st);

  const Tensor& src = need(st, "input.src");
  const int64_t S = src.shape()[1];
  Var x = src_embed.forward(src) * std::sqrt(double(o.d_model())) + Var(pe.rows(0, S));
  const Var memory = encoder.forward(x, key_padding_mask(src, 0));
  REQUIRE(rel_error(memory.data(), need(st, "output.memory")) <= 1e-4);
  const Var y = memory + 1.0;
  const Var loss = mean(y * y);
  REQUIRE_THAT(loss.item(), Catch::Matchers::WithinRel(need(st, "output.loss").item(), 1e-4));
  loss.backward();
  check_grads(params, st);
}

TEST_CASE("parity: full model", "[parity]") { check_seq2seq("full_model"); }
TEST_CASE("parity: full model with source and target padding", "[parity]") {
  check_seq2seq("full_model_padding");
}
TEST_CASE("parity: full model with label smoothing", "[parity]") {
  check_seq2seq("full_model_smoothing");
}
TEST_CASE("parity: GELU and post-norm", "[parity]") { check_seq2seq("full_model_gelu_postnorm"); }
TEST_CASE("parity: shared embeddings tied to the output projection", "[parity]") {
  check_seq2seq("full_model_tied");
}
