// Greedy and beam search on the incremental decoder.
#include <cmath>
#include <limits>

#include "rosetta/nn/nn.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::nn;

namespace {
Transformer make_model(Generator& g) {
  return Transformer(TransformerOptions()
                         .src_vocab(12)
                         .tgt_vocab(12)
                         .d_model(16)
                         .heads(2)
                         .ff(32)
                         .encoder_layers(1)
                         .decoder_layers(2)
                         .dropout(0.0)
                         .max_len(40),
                     g);
}

// Greedy decoding by re-running the full decoder on the whole prefix (the slow, obvious way).
std::vector<int32_t> greedy_by_full_forward(const Transformer& m, const Tensor& src_row, int steps,
                                            double* log_prob) {
  NoGradGuard ng;
  std::vector<int32_t> prefix{2};
  *log_prob = 0;
  for (int t = 0; t < steps; ++t) {
    const Tensor tgt = Tensor::from_vector(prefix, {1, int64_t(prefix.size())});
    const Tensor logits = m.forward(src_row, tgt).data().select(1, int64_t(prefix.size()) - 1);
    const Tensor lp = log_softmax(logits);
    const int32_t best = int32_t(argmax(lp, 1).at({0}));
    *log_prob += lp.at({0, best});
    if (best == 3) break;
    prefix.push_back(best);
  }
  return {prefix.begin() + 1, prefix.end()};
}
}  // namespace

TEST_CASE("greedy search equals argmax decoding over the full prefix", "[nn]") {
  Generator g(31);
  Transformer m = make_model(g);
  m.eval();
  const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 8, 4, 9, 10, 0, 0, 0}, {2, 5});
  const auto hyps = search(m, src, SearchOptions().max_len_a(0).max_len_b(8));
  REQUIRE(hyps.size() == 2);
  for (int64_t b = 0; b < 2; ++b) {
    double lp = 0;
    const auto expect = greedy_by_full_forward(m, src.narrow(0, b, 1).contiguous(), 8, &lp);
    REQUIRE(hyps[b].size() == 1);
    REQUIRE(hyps[b][0].tokens == expect);
    REQUIRE_THAT(hyps[b][0].log_prob, Catch::Matchers::WithinAbs(lp, 1e-4));
  }
}

TEST_CASE("beam search: beam 1 is greedy, wider beams score at least as well", "[nn]") {
  Generator g(32);
  Transformer m = make_model(g);
  m.eval();
  const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 8, 9, 10, 4, 11, 0}, {3, 3});
  const auto greedy = search(m, src, SearchOptions().max_len_b(6));
  const auto beam1 = search(m, src, SearchOptions().beam(1).max_len_b(6));
  const auto beam4 = search(m, src, SearchOptions().beam(4).n_best(4).max_len_b(6).length_penalty(0));
  for (int b = 0; b < 3; ++b) {
    REQUIRE(greedy[b][0].tokens == beam1[b][0].tokens);
    REQUIRE(beam4[b].size() == 4);
    // Unnormalised (alpha 0): the beam's best is at least as likely as greedy's.
    REQUIRE(beam4[b][0].log_prob >= greedy[b][0].log_prob - 1e-5);
    for (int k = 1; k < 4; ++k) REQUIRE(beam4[b][k - 1].score >= beam4[b][k].score);
  }
  REQUIRE_THROWS_AS(search(m, src, SearchOptions().beam(2).n_best(3)), Error);
}

TEST_CASE("search without early stop decodes the full length", "[nn]") {
  Generator g(33);
  Transformer m = make_model(g);
  m.eval();
  const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 8}, {2, 2});
  const auto hyps = search(m, src, SearchOptions().stop_at_eos(false).max_len_a(0).max_len_b(12));
  for (const auto& h : hyps) REQUIRE(h[0].tokens.size() == 12);
}

namespace {
// The first n-gram that `tokens` holds twice, or an empty vector.
std::vector<int32_t> repeated_ngram(const std::vector<int32_t>& tokens, size_t n) {
  for (size_t i = 0; i + n <= tokens.size(); ++i)
    for (size_t j = i + 1; j + n <= tokens.size(); ++j)
      if (std::equal(tokens.begin() + i, tokens.begin() + i + n, tokens.begin() + j))
        return {tokens.begin() + i, tokens.begin() + i + n};
  return {};
}
}  // namespace

TEST_CASE("search with no_repeat_ngram never repeats an n-gram, and is plain search when nothing repeats",
          "[nn]") {
  Generator g(34);
  Transformer m = make_model(g);
  m.eval();
  // Full-length decoding over 8 words: plain search repeats n-grams (the test would not test
  // anything otherwise); blocked search does not.
  const Tensor src = Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 8, 9, 10}, {2, 3});
  const auto base = SearchOptions().stop_at_eos(false).max_len_a(0).max_len_b(16);
  for (int beam : {1, 3}) {
    const auto plain = search(m, src, SearchOptions(base).beam(beam));
    for (int n : {2, 3}) {
      const auto blocked = search(m, src, SearchOptions(base).beam(beam).no_repeat_ngram(n));
      bool plain_repeats = false;
      for (int64_t b = 0; b < 2; ++b) {
        plain_repeats = plain_repeats || !repeated_ngram(plain[b][0].tokens, size_t(n)).empty();
        REQUIRE(blocked[b][0].tokens.size() == 16);
        REQUIRE(repeated_ngram(blocked[b][0].tokens, size_t(n)).empty());
        // Up to its first repeat, the plain hypothesis is what blocking would choose too (greedy).
        if (beam == 1 && repeated_ngram(plain[b][0].tokens, size_t(n)).empty())
          REQUIRE(blocked[b][0].tokens == plain[b][0].tokens);
      }
      REQUIRE(plain_repeats);
    }
  }
  REQUIRE_THROWS_AS(search(m, src, SearchOptions().no_repeat_ngram(-1)), Error);
  // NaN would score every hypothesis NaN (length penalty) or cut every one to a token (max_len_a).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(search(m, src, SearchOptions().length_penalty(nan)), Catch::Contains("length_penalty"));
  REQUIRE_THROWS_WITH(search(m, src, SearchOptions().max_len_a(nan)), Catch::Contains("max_len_a"));
  REQUIRE_THROWS_AS(search(m, src, SearchOptions().length_penalty(-1)), Error);
}
