// Attention and activation dropout: separate from the residual dropout, defaulting to it.
#include <cmath>
#include <limits>

#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;
using rosetta::test::AllClose;
using rosetta::test::closeness;

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
      .max_len(32);
}

// Draws of each kind of dropout in one forward of the batch below (B 2, S 4, T 3; D 16, H 4,
// F 24; two layers each side): the dropout generator's counter advances by these.
constexpr uint64_t kResidualDraws = 2 * 4 * 16 + 2 * 3 * 16  // embeddings
                                    + 2 * 2 * (2 * 4 * 16)   // encoder: 2 sublayers x 2 layers
                                    + 3 * 2 * (2 * 3 * 16);  // decoder: 3 sublayers x 2 layers
constexpr uint64_t kAttentionDraws = 2 * (2 * 4 * 4 * 4)     // encoder self [B, H, S, S]
                                     + 2 * (2 * 4 * 3 * 3)   // decoder self [B, H, T, T]
                                     + 2 * (2 * 4 * 3 * 4);  // cross [B, H, T, S]
constexpr uint64_t kActivationDraws = 2 * (2 * 4 * 24) + 2 * (2 * 3 * 24);  // [B, S|T, F]

struct Run {
  Tensor logits, embed_grad;
  uint64_t draws;
};

// One forward (and backward) with weights from a fixed seed, in training or eval mode.
Run run(const TransformerOptions& o, bool training = true) {
  Generator g(42);
  Transformer m(o, g);
  m.train(training);
  const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 0, 3, 4, 9, 10}, {2, 4});
  const Tensor tgt = Tensor::from_vector(std::vector<int32_t>{2, 8, 9, 2, 11, 0}, {2, 3});
  const uint64_t before = m.dropout_generator().counter();
  const Var y = m.forward(src, tgt);
  const uint64_t draws = m.dropout_generator().counter() - before;
  sum(y * y).backward();
  return {y.data(), m.src_embed->weight.grad(), draws};
}
}  // namespace

TEST_CASE("unset attention and activation dropout are the residual dropout, draw for draw",
          "[nn][dropout]") {
  REQUIRE(TransformerOptions().attention_dropout_p() == 0.1);
  REQUIRE(TransformerOptions().activation_dropout_p() == 0.1);
  for (const Activation act : {Activation::relu, Activation::gelu}) {  // relu takes the fused relu_dropout path
    CAPTURE(activation_name(act));
    const TransformerOptions unset = tiny().dropout(0.3).activation(act);
    REQUIRE(unset.attention_dropout() < 0);
    REQUIRE(unset.activation_dropout() < 0);
    const Run a = run(unset);
    const Run b = run(TransformerOptions(unset).attention_dropout(0.3).activation_dropout(0.3));
    REQUIRE(a.draws == kResidualDraws + kAttentionDraws + kActivationDraws);
    REQUIRE(b.draws == a.draws);
    REQUIRE_THAT(b.logits, AllClose(a.logits, 0, 0));
    REQUIRE_THAT(b.embed_grad, AllClose(a.embed_grad, 0, 0));
  }
}

TEST_CASE("attention and activation dropout reach only their own layers", "[nn][dropout]") {
  for (const Activation act : {Activation::relu, Activation::gelu}) {
    CAPTURE(activation_name(act));
    const TransformerOptions none =
        tiny().activation(act).dropout(0).attention_dropout(0).activation_dropout(0);
    const Tensor eval = run(none, false).logits;
    REQUIRE(run(none).draws == 0);  // p = 0 draws nothing
    REQUIRE_THAT(run(none).logits, AllClose(eval, 0, 0));

    const Run attention = run(TransformerOptions(none).attention_dropout(0.5));
    REQUIRE(attention.draws == kAttentionDraws);
    REQUIRE(closeness(attention.logits, eval, 0, 1e-6) > 1);

    const Run activation = run(TransformerOptions(none).activation_dropout(0.5));
    REQUIRE(activation.draws == kActivationDraws);
    REQUIRE(closeness(activation.logits, eval, 0, 1e-6) > 1);

    const Run residual = run(TransformerOptions(none).dropout(0.5));
    REQUIRE(residual.draws == kResidualDraws);
    REQUIRE(closeness(residual.logits, eval, 0, 1e-6) > 1);
  }
}

TEST_CASE("zero attention and activation dropout change training only", "[nn][dropout]") {
  const TransformerOptions all = tiny().dropout(0.3);
  const TransformerOptions residual_only =
      tiny().dropout(0.3).attention_dropout(0).activation_dropout(0);
  const Run a = run(all), r = run(residual_only);
  REQUIRE(r.draws == kResidualDraws);
  REQUIRE(closeness(r.logits, a.logits, 0, 1e-6) > 1);
  // Eval mode switches every dropout off: the same weights give the same logits.
  REQUIRE_THAT(run(residual_only, false).logits, AllClose(run(all, false).logits, 0, 0));
}

TEST_CASE("attention and activation dropout round-trip through metadata", "[nn][dropout]") {
  const auto meta = tiny().dropout(0.2).attention_dropout(0.05).activation_dropout(0).to_metadata();
  const TransformerOptions back = TransformerOptions::from_metadata(meta);
  REQUIRE(back.dropout() == 0.2);
  REQUIRE(back.attention_dropout_p() == 0.05);
  REQUIRE(back.activation_dropout_p() == 0.0);
  REQUIRE(back.to_metadata() == meta);

  // Unset values are written resolved: a checkpoint says what was used.
  const auto unset = tiny().dropout(0.2).to_metadata();
  REQUIRE(unset.at("model.attention_dropout") == unset.at("model.dropout"));
  REQUIRE(unset.at("model.activation_dropout") == unset.at("model.dropout"));
  REQUIRE(TransformerOptions::from_metadata(unset).to_metadata() == unset);

  // Checkpoints from before these options: both follow dropout.
  auto old = unset;
  old.erase("model.attention_dropout");
  old.erase("model.activation_dropout");
  const TransformerOptions o = TransformerOptions::from_metadata(old);
  REQUIRE(o.attention_dropout_p() == 0.2);
  REQUIRE(o.activation_dropout_p() == 0.2);
  REQUIRE(o.to_metadata() == unset);

  auto bad = meta;
  bad["model.activation_dropout"] = "lots";
  REQUIRE_THROWS_WITH(TransformerOptions::from_metadata(bad),
                      Catch::Contains("model.activation_dropout = 'lots' is not a number"));
  bad = meta;
  bad["model.attention_dropout"] = "1.5";
  REQUIRE_THROWS_WITH(TransformerOptions::from_metadata(bad),
                      Catch::Contains("attention_dropout 1.5 outside [0, 1)"));
}

TEST_CASE("attention and activation dropout are validated, negative means unset",
          "[nn][dropout]") {
  Generator g(7);
  for (double p : {1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(p);
    REQUIRE_THROWS_WITH(Transformer(tiny().attention_dropout(p), g),
                        Catch::Contains("model option attention_dropout") &&
                            Catch::Contains("outside [0, 1)"));
    REQUIRE_THROWS_WITH(Transformer(tiny().activation_dropout(p), g),
                        Catch::Contains("model option activation_dropout") &&
                            Catch::Contains("outside [0, 1)"));
  }
  REQUIRE_THROWS_WITH(tiny().attention_dropout(1.5).validate(),
                      Catch::Contains("attention_dropout 1.5 outside"));
  REQUIRE_THROWS_WITH(tiny().activation_dropout(1.0).validate(),
                      Catch::Contains("activation_dropout 1 outside"));
  const TransformerOptions negative =
      tiny().dropout(0.3).attention_dropout(-0.5).activation_dropout(-0.5);
  REQUIRE_NOTHROW(negative.validate());
  REQUIRE(negative.attention_dropout_p() == 0.3);
  REQUIRE(negative.activation_dropout_p() == 0.3);
  REQUIRE_NOTHROW(tiny().attention_dropout(0.999).activation_dropout(0).validate());
}
