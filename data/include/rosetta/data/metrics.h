// Corpus-level BLEU and chrF, equal to sacreBLEU 2.x with its default settings.
//
//   BleuScore b = corpus_bleu(hyps, refs);   // sacreBLEU BLEU(): tok 13a, mixed case, smooth exp
//   ChrfScore c = corpus_chrf(hyps, refs);   // sacreBLEU CHRF(): chrF2, char 6-grams, no spaces
//   b.str()  // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ..."
//   c.str()  // "chrF2 = 59.73"
//
// Both metrics are corpus statistics first, a score second, as in sacreBLEU: each sentence pair
// gives integer counts (BleuStats / ChrfStats), the corpus sums them, and the score is computed
// once from the sums. The *_stats / *_from_stats functions expose the two halves, so a caller can
// accumulate statistics batch by batch and score at the end.
//
// Input is UTF-8 (invalid UTF-8 throws). "Whitespace" everywhere means what Python's str.split()
// splits on (ASCII \t \n \v \f \r, \x1c-\x1f, space, and U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000), because that is what sacreBLEU uses.
//
// As in sacreBLEU, a reference that is the empty string "" is not a reference: with one
// reference per sentence it throws; with several, empty ones are skipped (at least one must be
// left). Hypotheses may be empty. An empty corpus and differing hyp/ref counts throw.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/lifetime.h"

namespace rosetta::data {

// ---------------------------------------------------------------- tokenizer '13a'

// The mteval-v13a tokenizer (sacreBLEU's '13a'), on one line:
//   1. remove "<skipped>", join "-\n" (hyphenated line breaks), other "\n" -> " ",
//      un-escape &quot; &amp; &lt; &gt; (in that order, each a plain replace-all);
//   2. pad " line " with the four regexes, applied one after the other (Python re.sub:
//      leftmost, non-overlapping matches):
//        ([\{-\~\[-\` -\&\(-\+\:-\@\/])  ->  " \1 "   punctuation except ' , - .
//        ([^0-9])([\.,])                 ->  "\1 \2 "  . and , unless preceded by a digit
//        ([\.,])([^0-9])                 ->  " \1 \2"  . and , unless followed by a digit
//        ([0-9])(-)                      ->  "\1 \2 "  - when preceded by a digit
//   3. split on whitespace.
// corpus_bleu additionally strips trailing whitespace from each line first (sacreBLEU does
// sent.rstrip() before tokenizing), so "a -\n" is "a -" there but "a" here.
std::vector<std::string> tokenize_13a(std::string_view line);

// ---------------------------------------------------------------- BLEU

inline constexpr int kBleuMaxOrder = 4;

// Sufficient statistics of BLEU for one sentence or a whole corpus (they add up).
struct BleuStats {
  std::array<int64_t, kBleuMaxOrder> correct{};  // clipped n-gram matches, index n-1
  std::array<int64_t, kBleuMaxOrder> total{};    // hypothesis n-grams, index n-1
  int64_t hyp_len = 0;                            // hypothesis tokens
  int64_t ref_len = 0;                            // closest reference length, in tokens

  BleuStats& operator+=(const BleuStats& o);
};

struct BleuScore {
  double score = 0.0;                             // 0-100
  std::array<double, kBleuMaxOrder> precisions{}; // 0-100, smoothed (see bleu_from_stats)
  double bp = 0.0;                                // brevity penalty
  double ratio = 0.0;                             // hyp_len / ref_len (0 when ref_len is 0)
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  std::array<int64_t, kBleuMaxOrder> counts{};    // matches per order (BleuStats::correct)
  std::array<int64_t, kBleuMaxOrder> totals{};    // hypothesis n-grams per order

  // sacreBLEU's text form, e.g.
  // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
  // The settings equal sacreBLEU's signature "case:mixed|eff:no|tok:13a|smooth:exp".
  std::string str() const;
};

// Statistics of one hypothesis against its references (13a-tokenized after rstrip):
// hypothesis n-gram counts are clipped by the maximum count over the references, and ref_len is
// the reference length closest to the hypothesis length (the shorter one on a tie).
BleuStats bleu_stats(std::string_view hyp, const std::vector<std::string>& refs);

// sacreBLEU's compute_bleu with smooth_method 'exp', no effective order:
//   BP = 1 if hyp_len >= ref_len, exp(1 - ref_len / hyp_len) if 0 < hyp_len < ref_len, 0 if
//   hyp_len == 0;
//   no match at any order -> score 0 (all precisions 0);
//   p_n = 100 * correct_n / total_n, or 100 / (2^k * total_n) for the k-th order with no match;
//   an order with no hypothesis n-gram at all (total_n == 0) -> score 0;
//   score = BP * exp((log p_1 + ... + log p_4) / 4).
BleuScore bleu_from_stats(const BleuStats& stats);

// Corpus BLEU with one reference per hypothesis: refs[i] is the reference of hyps[i].
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// Corpus BLEU with several references per hypothesis, in sacreBLEU's layout:
// ref_streams[k][i] is the k-th reference of hyps[i]; every stream has hyps.size() lines.
BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams);

// ---------------------------------------------------------------- chrF

// chrF settings; the defaults are sacreBLEU's CHRF() (chrF2). Chainable:
// ChrfOptions().beta(3).eps_smoothing(true). Word n-grams (chrF++) are not supported.
struct ChrfOptions {
  int char_order_ = 6;         // character n-grams of order 1..char_order
  double beta_ = 2.0;          // recall is beta times as important as precision
  bool whitespace_ = false;    // false: whitespace is removed before taking n-grams
  // false (sacreBLEU's default): average precision and recall over the orders that have both
  // hypothesis and reference n-grams, then one F-score. true: average the per-order F-scores
  // with chrF++.py's epsilon smoothing.
  bool eps_smoothing_ = false;

  ROSETTA_SETTER(ChrfOptions, char_order, int, char_order_)
  ROSETTA_SETTER(ChrfOptions, beta, double, beta_)
  ROSETTA_SETTER(ChrfOptions, whitespace, bool, whitespace_)
  ROSETTA_SETTER(ChrfOptions, eps_smoothing, bool, eps_smoothing_)
};

// Sufficient statistics of chrF: for each order n = 1..char_order, three counts at
// counts[3*(n-1) + {0,1,2}]: hypothesis n-grams, reference n-grams, matched n-grams (the
// multiset intersection). A sentence whose reference has no n-gram of order n contributes 0
// hypothesis n-grams at that order (as sacreBLEU counts them).
struct ChrfStats {
  std::vector<int64_t> counts;  // (3 * char_order)

  ChrfStats& operator+=(const ChrfStats& o);
};

struct ChrfScore {
  double score = 0.0;  // 0-100
  double beta = 2.0;

  // sacreBLEU's text form, e.g. "chrF2 = 59.73".
  std::string str() const;
};

// Statistics of one hypothesis against its references; with several (non-empty) references,
// those of the reference with the best sentence-level chrF (the first one on a tie).
ChrfStats chrf_stats(std::string_view hyp, const std::vector<std::string>& refs,
                     const ChrfOptions& opts = {});

// sacreBLEU's _compute_f_score on summed statistics, scaled to 0-100.
ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& opts = {});

// Corpus chrF with one reference per hypothesis: refs[i] is the reference of hyps[i].
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const ChrfOptions& opts = {});

// Corpus chrF with several references per hypothesis: ref_streams[k][i] is the k-th reference
// of hyps[i].
ChrfScore corpus_chrf_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const ChrfOptions& opts = {});

}  // namespace rosetta::data
