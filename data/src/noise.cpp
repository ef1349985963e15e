#include "rosetta/data/noise.h"

#include <algorithm>
#include <cmath>

#include "rosetta/core/check.h"
#include "rosetta/core/random.h"

namespace rosetta::data {

namespace {

// A uniform [0, 1) number for (seed, epoch, pair, stream, position): one Generator per pair,
// hashed at a counter that encodes the rest. Streams keep the sides' draws apart.
double unit_draw(uint64_t seed, uint64_t epoch, uint64_t pair, uint64_t stream, uint64_t pos) {
  const Generator g(seed ^ (0x5851F42D4C957F2Dull * (epoch + 1)));
  return Generator::to_unit(g.hash((pair << 24) ^ (stream << 20) ^ pos));
}

void drop_tokens(Tensor& ids, const std::vector<int64_t>& rows, int64_t first, double p, uint64_t seed,
                 uint64_t epoch, uint64_t stream) {
  if (p <= 0) return;
  int32_t* d = ids.data<int32_t>();
  const int64_t B = ids.size(0), T = ids.size(1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = first; t < T; ++t) {
      int32_t& id = d[b * T + t];
      if (id == kPadId || id == kBosId || id == kEosId) continue;
      if (unit_draw(seed, epoch, uint64_t(rows[size_t(b)]), stream, uint64_t(t)) < p) id = kUnkId;
    }
}

}  // namespace

void word_dropout(Batch& batch, double p_src, double p_tgt, uint64_t seed, uint64_t epoch) {
  ROSETTA_CHECK(p_src >= 0 && p_src < 1 && p_tgt >= 0 && p_tgt < 1, "word_dropout: probabilities ", p_src, ", ",
                p_tgt, " outside [0, 1)");
  ROSETTA_CHECK(batch.src.is_contiguous() && batch.tgt_in.is_contiguous(), "word_dropout: batch not contiguous");
  drop_tokens(batch.src, batch.indices, 0, p_src, seed, epoch, 1);
  drop_tokens(batch.tgt_in, batch.indices, 1, p_tgt, seed, epoch, 2);  // position 0 is bos
}

SegmentationSampler::Alternatives SegmentationSampler::make(std::vector<std::vector<int32_t>> ids,
                                                            const Tokenizer& tok, double alpha, size_t max_len,
                                                            const std::vector<int32_t>& prefix) {
  Alternatives a;
  std::vector<double> logits;
  for (auto& alt : ids) {
    if (alt.empty() || (max_len && alt.size() + prefix.size() > max_len && !a.ids.empty())) continue;
    logits.push_back(alpha * tok.segmentation_score(alt));
    alt.insert(alt.begin(), prefix.begin(), prefix.end());
    a.ids.push_back(std::move(alt));
  }
  if (a.ids.empty()) a.ids.push_back(prefix);
  // Softmax of alpha * score over the alternatives, as a cumulative distribution.
  const double top = logits.empty() ? 0 : *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double l : logits) a.cdf.push_back(sum += std::exp(l - top));
  for (double& c : a.cdf) c /= sum;
  return a;
}

const std::vector<int32_t>& SegmentationSampler::draw(const Alternatives& a, double u) {
  const size_t k = size_t(std::upper_bound(a.cdf.begin(), a.cdf.end(), u) - a.cdf.begin());
  return a.ids[std::min(k, a.ids.size() - 1)];
}

SegmentationSampler::SegmentationSampler(const std::vector<SentencePair>& pairs, const Tokenizer& src_tok,
                                         const Tokenizer& tgt_tok, const Options& o,
                                         const std::vector<std::vector<int32_t>>& prefix) {
  ROSETTA_CHECK(o.nbest >= 1, "SegmentationSampler: nbest must be positive, got ", o.nbest);
  ROSETTA_CHECK(o.alpha >= 0 && std::isfinite(o.alpha), "SegmentationSampler: alpha must be >= 0, got ", o.alpha);
  ROSETTA_CHECK(prefix.empty() || prefix.size() == pairs.size(), "SegmentationSampler: ", prefix.size(),
                " prefixes for ", pairs.size(), " pairs");
  static const std::vector<int32_t> none;
  src_.reserve(pairs.size());
  tgt_.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    src_.push_back(make(src_tok.nbest_encode(pairs[i].src, o.nbest), src_tok, o.alpha, o.max_src,
                        prefix.empty() ? none : prefix[i]));
    tgt_.push_back(make(tgt_tok.nbest_encode(pairs[i].tgt, o.nbest), tgt_tok, o.alpha, o.max_tgt, none));
  }
}

std::vector<TokenPair> SegmentationSampler::sample(uint64_t seed, uint64_t epoch) const {
  std::vector<TokenPair> out(src_.size());
  for (size_t i = 0; i < src_.size(); ++i) {
    out[i].src = draw(src_[i], unit_draw(seed, epoch, i, 3, 0));
    out[i].tgt = draw(tgt_[i], unit_draw(seed, epoch, i, 4, 0));
  }
  return out;
}

}  // namespace rosetta::data
