// Transformer::attention_weights: every layer's attention probabilities, for inspection.
#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;
using rosetta::test::AllClose;

TEST_CASE("attention_weights gives every layer's probabilities, masked, the last cross layer's as decode",
          "[nn]") {
  for (bool norm_first : {true, false}) {
    Generator g(11);
    Transformer m(TransformerOptions()
                      .src_vocab(17).tgt_vocab(19).d_model(16).heads(4).ff(24)
                      .encoder_layers(2).decoder_layers(3).dropout(0.0).max_len(32).norm_first(norm_first),
                  g);
    m.eval();
    NoGradGuard ng;
    const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 0, 8, 9, 10, 11}, {2, 4});
    const Tensor tgt = Tensor::from_vector(std::vector<int32_t>{2, 4, 5, 2, 6, 0}, {2, 3});
    const auto w = m.attention_weights(src, tgt);
    REQUIRE(w.encoder_self.size() == 2);
    REQUIRE(w.decoder_self.size() == 3);
    REQUIRE(w.decoder_cross.size() == 3);
    for (const Tensor& t : w.encoder_self) REQUIRE(t.shape() == Shape{2, 4, 4, 4});
    for (const Tensor& t : w.decoder_self) REQUIRE(t.shape() == Shape{2, 4, 3, 3});
    for (const Tensor& t : w.decoder_cross) REQUIRE(t.shape() == Shape{2, 4, 3, 4});
    // Rows are distributions; padded keys (source 0 position 3, target 1 position 2) and future
    // positions get nothing.
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t l = 0; l < 3; ++l)
          for (int64_t t = 0; t < 3; ++t) {
            double cross = 0, self = 0;
            for (int64_t s = 0; s < 4; ++s) {
              const double p = w.decoder_cross[size_t(l)].at({b, h, t, s});
              if (src.at({b, s}) == 0) REQUIRE(p == 0);
              cross += p;
            }
            for (int64_t s = 0; s < 3; ++s) {
              const double p = w.decoder_self[size_t(l)].at({b, h, t, s});
              if (s > t || tgt.at({b, s}) == 0) REQUIRE(p == 0);
              self += p;
            }
            REQUIRE_THAT(cross, Catch::Matchers::WithinAbs(1.0, 1e-5));
            REQUIRE_THAT(self, Catch::Matchers::WithinAbs(1.0, 1e-5));
          }
    REQUIRE(w.encoder_self[1].at({0, 2, 1, 3}) == 0);
    // The last layer's cross-attention is the one decode reports.
    Tensor last;
    m.decode(tgt, m.encode(src), key_padding_mask(src, 0), &last);
    REQUIRE_THAT(w.decoder_cross.back(), AllClose(last, 1e-6, 1e-7));
  }
}
