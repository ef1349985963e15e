// Training-side noise for low-resource translation: word dropout and sampled segmentations
// (subword regularization, Kudo 2018). Each is a pure function of (seed, epoch, pair index), so
// a run resumed mid-epoch draws exactly the noise the uninterrupted run drew, at any thread
// count and on any number of model replicas.
#pragma once

#include <cstdint>
#include <vector>

#include "rosetta/data/batch.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/tokenizer.h"

namespace rosetta::data {

// Replaces each real token of `batch.src` (probability p_src) and of the decoder input
// `batch.tgt_in` (p_tgt) by kUnkId; bos, padding and the predicted tokens (tgt_out) are kept.
// The draw for a token is a hash of (seed, epoch, the pair's corpus index, side, position).
void word_dropout(Batch& batch, double p_src, double p_tgt, uint64_t seed, uint64_t epoch);

// The n-best segmentations of every pair of a corpus, computed once; `sample` draws one per side
// and pair with probability proportional to exp(alpha * log-probability of the segmentation).
// alpha -> 0 samples uniformly among the n best; large alpha approaches the best one.
class SegmentationSampler {
 public:
  struct Options {
    int nbest = 8;
    double alpha = 0.2;
    size_t max_src = 0, max_tgt = 0;  // alternatives longer than these are not drawn (0: any)
  };
  // `prefix[i]` (when given, one per pair) is prepended to every source alternative of pair i
  // (e.g. a tag marking pairs of another origin).
  SegmentationSampler(const std::vector<SentencePair>& pairs, const Tokenizer& src_tok,
                      const Tokenizer& tgt_tok, const Options& options,
                      const std::vector<std::vector<int32_t>>& prefix = {});

  // One segmentation of every pair, in corpus order. Deterministic in (seed, epoch).
  std::vector<TokenPair> sample(uint64_t seed, uint64_t epoch) const;
  size_t size() const { return src_.size(); }

 private:
  struct Alternatives {
    std::vector<std::vector<int32_t>> ids;  // best first
    std::vector<double> cdf;                // cumulative sampling probabilities
  };
  static Alternatives make(std::vector<std::vector<int32_t>> ids, const Tokenizer& tok, double alpha,
                           size_t max_len, const std::vector<int32_t>& prefix);
  static const std::vector<int32_t>& draw(const Alternatives& a, double u);
  std::vector<Alternatives> src_, tgt_;
};

}  // namespace rosetta::data
