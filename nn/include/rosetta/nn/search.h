// Greedy and beam search on the incremental decoder.
//
// Each step feeds one token per live beam and reuses the cached keys and values, so a step
// costs O(current length) instead of re-running the decoder over the whole prefix. Finished
// sentences leave the batch.
#pragma once

#include <vector>

#include "rosetta/nn/transformer.h"

namespace rosetta::nn {

struct SearchOptions {
  ROSETTA_ARG(int, beam) = 1;                 // 1 = greedy
  ROSETTA_ARG(double, length_penalty) = 1.0;  // score = log-prob / length^alpha
  ROSETTA_ARG(int, n_best) = 1;               // hypotheses returned per sentence (<= beam)
  // A sentence of S source tokens gets at most max_len_a * S + max_len_b target tokens (and
  // never more than the model's max_len - 1).
  ROSETTA_ARG(double, max_len_a) = 1.5;
  ROSETTA_ARG(int64_t, max_len_b) = 10;
  ROSETTA_ARG(int32_t, bos) = 2;
  ROSETTA_ARG(int32_t, eos) = 3;
  ROSETTA_ARG(bool, stop_at_eos) = true;  // false: always decode the full length (benchmarks)
  // N > 0: no hypothesis repeats an N-gram of target tokens (a token that would complete one it
  // already holds is never chosen), against the loops of an undertrained model ("with with
  // with ..."). 0: off.
  ROSETTA_ARG(int, no_repeat_ngram) = 0;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without bos and eos
  double score = 0;             // length-normalised log-probability
  double log_prob = 0;          // sum of token log-probabilities (eos included when emitted)
};

// src [B, S] (I32, padded with the model's pad id). Returns, for each source row, up to n_best
// hypotheses, best first. Runs without recording a graph, in eval mode semantics (the caller
// puts the model in eval mode).
std::vector<std::vector<Hypothesis>> search(const Transformer& model, const Tensor& src,
                                            const SearchOptions& options = {});

}  // namespace rosetta::nn
