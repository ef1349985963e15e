// Training-side noise: word dropout and sampled segmentations are pure functions of
// (seed, epoch, pair), so a resumed run draws what the uninterrupted one drew.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "rosetta/core/random.h"
#include "rosetta/data/batch.h"
#include "rosetta/data/noise.h"
#include "rosetta/data/tokenizer.h"

using namespace rosetta::data;

namespace {

std::vector<SentencePair> make_pairs(size_t n) {
  static const char* kDe[] = {"der", "Hund", "läuft", "schnell", "über", "die", "Straße", "Katze", "schläft",
                              "im", "Garten", "heute", "Morgen", "wir", "essen", "Äpfel", "und", "Brot"};
  static const char* kEn[] = {"the", "dog", "runs", "quickly", "across", "street", "cat", "sleeps",
                              "in", "garden", "today", "morning", "we", "eat", "apples", "and", "bread"};
  rosetta::Generator g(11);
  std::vector<SentencePair> out;
  for (size_t i = 0; i < n; ++i) {
    SentencePair p;
    const size_t len = 3 + g.next_below(7);
    for (size_t j = 0; j < len; ++j) {
      p.src += std::string(j ? " " : "") + kDe[g.next_below(std::size(kDe))];
      p.tgt += std::string(j ? " " : "") + kEn[g.next_below(std::size(kEn))];
    }
    out.push_back(p);
  }
  return out;
}

struct Fixture {
  std::vector<SentencePair> pairs = make_pairs(200);
  Tokenizer tok = [&] {
    std::vector<std::string> text;
    for (const auto& p : pairs) text.push_back(p.src), text.push_back(p.tgt);
    return Tokenizer::train(text, TokenizerOptions().vocab_size(80));
  }();
};

std::vector<int32_t> ids_of(const rosetta::Tensor& t) {
  const rosetta::Tensor c = t.contiguous();
  return std::vector<int32_t>(c.data<int32_t>(), c.data<int32_t>() + c.numel());
}

}  // namespace

TEST_CASE("word dropout: reproducible per (seed, epoch), unk only on real input tokens", "[data][noise]") {
  Fixture f;
  const auto tokens = tokenize(f.pairs, f.tok, f.tok);
  std::vector<uint32_t> rows(tokens.size());
  for (uint32_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const BatchOptions o = BatchOptions().max_tokens(1 << 20);
  const Batch clean = collate(tokens, rows, o);

  Batch a = collate(tokens, rows, o), b = collate(tokens, rows, o), c = collate(tokens, rows, o);
  word_dropout(a, 0.2, 0.3, 7, 3);
  word_dropout(b, 0.2, 0.3, 7, 3);
  word_dropout(c, 0.2, 0.3, 7, 4);
  CHECK(ids_of(a.src) == ids_of(b.src));
  CHECK(ids_of(a.tgt_in) == ids_of(b.tgt_in));
  CHECK(ids_of(a.src) != ids_of(c.src));      // another epoch, other draws
  CHECK(ids_of(a.tgt_out) == ids_of(clean.tgt_out));  // what is predicted is never changed

  // Only real tokens become unk, at about the asked rate; bos and padding stay.
  auto check_side = [](const std::vector<int32_t>& before, const std::vector<int32_t>& after, double p) {
    int64_t real = 0, dropped = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      if (before[i] == kPadId || before[i] == kBosId) {
        CHECK(after[i] == before[i]);
        continue;
      }
      ++real;
      if (after[i] != before[i]) {
        CHECK(after[i] == kUnkId);
        ++dropped;
      }
    }
    CHECK(double(dropped) / double(real) == Approx(p).margin(0.03));
  };
  check_side(ids_of(clean.src), ids_of(a.src), 0.2);
  check_side(ids_of(clean.tgt_in), ids_of(a.tgt_in), 0.3);

  // A pair's draws depend on the pair, not on its batch: pair 5 alone gets the same noise.
  Batch one = collate(tokens, {5}, o);
  word_dropout(one, 0.2, 0.3, 7, 3);
  const auto src_all = ids_of(a.src), src_one = ids_of(one.src);
  const int64_t S = a.src.size(1);
  for (size_t t = 0; t < src_one.size(); ++t) CHECK(src_one[t] == src_all[size_t(5 * S) + t]);

  Batch zero = collate(tokens, rows, o);
  word_dropout(zero, 0, 0, 7, 3);
  CHECK(ids_of(zero.src) == ids_of(clean.src));
  CHECK_THROWS(word_dropout(zero, 1.0, 0, 7, 3));
}

TEST_CASE("sampled segmentations: the same text, reproducible, varied across epochs", "[data][noise]") {
  Fixture f;
  SegmentationSampler::Options o;
  o.nbest = 8;
  o.alpha = 0;  // uniform among the 8 best
  const SegmentationSampler sampler(f.pairs, f.tok, f.tok, o);
  REQUIRE(sampler.size() == f.pairs.size());
  const auto e0 = sampler.sample(1, 0), again = sampler.sample(1, 0), e1 = sampler.sample(1, 1);
  size_t differ = 0, not_best = 0;
  for (size_t i = 0; i < f.pairs.size(); ++i) {
    CHECK(e0[i].src == again[i].src);
    CHECK(e0[i].tgt == again[i].tgt);
    differ += e0[i].src != e1[i].src;
    not_best += e0[i].src != f.tok.encode(f.pairs[i].src);
    // Every segmentation spells the sentence.
    CHECK(f.tok.decode(e0[i].src) == f.pairs[i].src);
    CHECK(f.tok.decode(e1[i].tgt) == f.pairs[i].tgt);
  }
  CHECK(differ > f.pairs.size() / 4);
  CHECK(not_best > f.pairs.size() / 4);

  // A large alpha concentrates on the best segmentation.
  o.alpha = 50;
  const auto sharp = SegmentationSampler(f.pairs, f.tok, f.tok, o).sample(1, 0);
  size_t best = 0;
  for (size_t i = 0; i < f.pairs.size(); ++i) best += sharp[i].src == f.tok.encode(f.pairs[i].src);
  CHECK(best > f.pairs.size() * 9 / 10);

  // A prefix goes before every source alternative.
  std::vector<std::vector<int32_t>> prefix(f.pairs.size(), std::vector<int32_t>{kBosId});
  const auto tagged = SegmentationSampler(f.pairs, f.tok, f.tok, o, prefix).sample(1, 0);
  for (const auto& p : tagged) CHECK(p.src.front() == kBosId);
}

TEST_CASE("a resampled BatchIterator restored mid-epoch serves the batches of the uninterrupted one",
          "[data][noise]") {
  Fixture f;
  SegmentationSampler::Options o;
  o.nbest = 4;
  o.alpha = 0.2;
  const SegmentationSampler sampler(f.pairs, f.tok, f.tok, o);
  const BatchOptions bo = BatchOptions().max_tokens(200).seed(3);
  auto make = [&] {
    BatchIterator it(tokenize(f.pairs, f.tok, f.tok), bo);
    it.set_resampler([&](uint64_t epoch) { return sampler.sample(9, epoch); });
    return it;
  };
  BatchIterator straight = make();
  std::vector<std::vector<int32_t>> served;
  BatchState middle;
  const size_t per_epoch = straight.batches_in_epoch();
  for (size_t i = 0; i < 3 * per_epoch; ++i) {
    if (i == per_epoch + 2) middle = straight.state();
    served.push_back(ids_of(straight.next().src));
  }
  BatchIterator resumed = make();
  resumed.restore(middle);
  for (size_t i = per_epoch + 2; i < 3 * per_epoch; ++i) CHECK(ids_of(resumed.next().src) == served[i]);
  // The epochs' segmentations differ: the second epoch's pairs are not the first's.
  CHECK(served[0] != served[per_epoch]);
}
