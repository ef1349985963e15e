// Corpus BLEU and chrF, equal to sacreBLEU 2.x defaults. Written from sacreBLEU's
// metrics/bleu.py (compute_bleu, _compute_segment_statistics), metrics/chrf.py
// (_get_match_statistics, _compute_f_score) and tokenizers/tokenizer_13a.py + tokenizer_re.py.
//
// Text is decoded to code points (std::u32string) because sacreBLEU works on Python str:
// character n-grams of chrF are code-point n-grams, and whitespace is Unicode whitespace.
#include "rosetta/data/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "line_reader.h"
#include "rosetta/core/check.h"

namespace rosetta::data {

namespace {

// ---------------------------------------------------------------- UTF-8 and Python whitespace

// Strict UTF-8 decoding, as Python's: overlong forms, surrogates and values past U+10FFFF throw.
std::u32string decode_utf8(std::string_view s, const char* what, size_t index) {
  static constexpr char32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    char32_t cp = 0;
    size_t len = 0;
    if (lead < 0x80) {
      cp = lead, len = 1;
    } else if ((lead & 0xE0) == 0xC0) {
      cp = lead & 0x1F, len = 2;
    } else if ((lead & 0xF0) == 0xE0) {
      cp = lead & 0x0F, len = 3;
    } else if ((lead & 0xF8) == 0xF0) {
      cp = lead & 0x07, len = 4;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      ok = (cont & 0xC0) == 0x80;
      cp = (cp << 6) | (cont & 0x3F);
    }
    ok = ok && cp >= kMinForLength[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    ROSETTA_CHECK(ok, "metrics: invalid UTF-8 at byte ", i, " of ", what, " ", index);
    out.push_back(cp);
    i += len;
  }
  return out;
}

// Python's str.isspace(), which str.split() and str.rstrip() use.
bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::u32string rstrip(std::u32string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

std::u32string remove_spaces(const std::u32string& s) {  // "".join(s.split())
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s)
    if (!is_space(c)) out.push_back(c);
  return out;
}

// ---------------------------------------------------------------- tokenizer '13a'

// Python's str.replace(from, to): left to right, non-overlapping, the result is not rescanned.
std::u32string replace_all(const std::u32string& s, std::u32string_view from,
                           std::u32string_view to) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out.append(to);
      i += from.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }
// The class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and space, except ' , - .
bool is_padded_punct(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

// re.sub(r'(A)(B)', fmt, s) for a pattern of two one-character groups: scan left to right, take
// the leftmost match, continue after it. In fmt, U'\1' and U'\2' stand for the groups.
template <class First, class Second>
std::u32string sub_pairs(const std::u32string& s, First first, Second second,
                         std::u32string_view fmt) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      for (char32_t f : fmt) out.push_back(f == U'\1' ? s[i] : f == U'\2' ? s[i + 1] : f);
      i += 2;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

std::vector<std::string> split_utf8(const std::u32string& s) {  // Python's str.split()
  std::vector<std::string> words;
  std::string word;
  for (char32_t c : s) {
    if (is_space(c)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      append_utf8(word, c);
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

std::vector<std::string> tokenize_13a_u32(const std::u32string& text) {
  std::u32string line = replace_all(text, U"<skipped>", U"");
  line = replace_all(line, U"-\n", U"");
  line = replace_all(line, U"\n", U" ");
  line = replace_all(line, U"&quot;", U"\"");
  line = replace_all(line, U"&amp;", U"&");
  line = replace_all(line, U"&lt;", U"<");
  line = replace_all(line, U"&gt;", U">");

  std::u32string padded = U" ";
  for (char32_t c : line) {  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
    if (is_padded_punct(c)) {
      padded += U' ', padded += c, padded += U' ';
    } else {
      padded += c;
    }
  }
  padded += U' ';
  auto not_digit = [](char32_t c) { return !is_digit(c); };
  auto is_hyphen = [](char32_t c) { return c == U'-'; };
  padded = sub_pairs(padded, not_digit, is_period_or_comma, U"\1 \2 ");  // ([^0-9])([\.,])
  padded = sub_pairs(padded, is_period_or_comma, not_digit, U" \1 \2");  // ([\.,])([^0-9])
  padded = sub_pairs(padded, is_digit, is_hyphen, U"\1 \2 ");            // ([0-9])(-)
  return split_utf8(padded);
}

// ---------------------------------------------------------------- shared argument checks

void check_corpus(const char* fn, size_t num_hyps,
                  const std::vector<std::vector<std::string>>& ref_streams) {
  ROSETTA_CHECK(num_hyps > 0, fn, ": empty corpus (0 hypotheses)");
  ROSETTA_CHECK(!ref_streams.empty(), fn, ": no reference streams");
  for (size_t k = 0; k < ref_streams.size(); ++k)
    ROSETTA_CHECK(ref_streams[k].size() == num_hyps, fn, ": ", num_hyps, " hypotheses but ",
                  ref_streams[k].size(), " references", ref_streams.size() > 1 ? " in stream " : "",
                  ref_streams.size() > 1 ? std::to_string(k) : "");
}

// The references of sentence i: the non-empty lines refs[k][i] (sacreBLEU drops "" and None).
std::vector<std::string> sentence_refs(const std::vector<std::vector<std::string>>& ref_streams,
                                       size_t i) {
  std::vector<std::string> refs;
  for (const auto& stream : ref_streams)
    if (!stream[i].empty()) refs.push_back(stream[i]);
  return refs;
}

// ---------------------------------------------------------------- BLEU

// Counts of the word n-grams of orders 1..4, keyed by the tokens joined with ' ' (tokens hold no
// whitespace, so the key is unambiguous). ngrams[n-1] holds order n.
using NgramCounts = std::unordered_map<std::string, int64_t>;

std::array<NgramCounts, kBleuMaxOrder> word_ngrams(const std::vector<std::string>& toks) {
  std::array<NgramCounts, kBleuMaxOrder> ngrams;
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string key;
    for (size_t n = 1; n <= kBleuMaxOrder && i + n <= toks.size(); ++n) {
      if (n > 1) key += ' ';
      key += toks[i + n - 1];
      ++ngrams[n - 1][key];
    }
  }
  return ngrams;
}

std::vector<std::string> bleu_preprocess(std::string_view s, const char* what, size_t index) {
  return tokenize_13a_u32(rstrip(decode_utf8(s, what, index)));
}

BleuStats bleu_stats_impl(std::string_view hyp, const std::vector<std::string>& refs,
                          size_t index) {
  ROSETTA_CHECK(!refs.empty(), "bleu: sentence ", index,
                " has no reference (empty references are not references, as in sacreBLEU)");
  BleuStats st;
  const std::vector<std::string> hyp_toks = bleu_preprocess(hyp, "hypothesis", index);
  st.hyp_len = static_cast<int64_t>(hyp_toks.size());

  // Reference n-gram counts: the maximum over references. ref_len: closest to hyp_len,
  // the shorter on a tie.
  std::array<NgramCounts, kBleuMaxOrder> ref_ngrams;
  int64_t closest_diff = -1;
  for (const std::string& ref : refs) {
    const std::vector<std::string> ref_toks = bleu_preprocess(ref, "reference", index);
    const auto len = static_cast<int64_t>(ref_toks.size());
    const int64_t diff = std::abs(st.hyp_len - len);
    if (closest_diff == -1 || diff < closest_diff || (diff == closest_diff && len < st.ref_len)) {
      closest_diff = diff;
      st.ref_len = len;
    }
    auto this_ngrams = word_ngrams(ref_toks);
    for (int n = 0; n < kBleuMaxOrder; ++n)
      for (const auto& [ng, count] : this_ngrams[n]) {
        int64_t& best = ref_ngrams[n][ng];
        best = std::max(best, count);
      }
  }

  const auto hyp_ngrams = word_ngrams(hyp_toks);
  for (int n = 0; n < kBleuMaxOrder; ++n)
    for (const auto& [ng, count] : hyp_ngrams[n]) {
      st.total[n] += count;
      auto it = ref_ngrams[n].find(ng);
      if (it != ref_ngrams[n].end()) st.correct[n] += std::min(count, it->second);
    }
  return st;
}

// ---------------------------------------------------------------- chrF

void check_chrf_options(const ChrfOptions& opts) {
  ROSETTA_CHECK(opts.char_order_ >= 1, "chrf: char_order must be >= 1, got ", opts.char_order_);
  ROSETTA_CHECK(opts.beta_ >= 0.0, "chrf: beta must be >= 0, got ", opts.beta_);
}

std::u32string chrf_preprocess(std::string_view s, const ChrfOptions& opts, const char* what,
                               size_t index) {
  std::u32string text = decode_utf8(s, what, index);
  return opts.whitespace_ ? text : remove_spaces(text);
}

using CharNgramCounts = std::unordered_map<std::u32string_view, int64_t>;

CharNgramCounts char_ngrams(const std::u32string& s, size_t n) {  // views into s
  CharNgramCounts counts;
  for (size_t i = 0; i + n <= s.size(); ++i) ++counts[std::u32string_view(s).substr(i, n)];
  return counts;
}

ChrfStats chrf_pair_stats(const std::u32string& hyp, const std::u32string& ref,
                          const ChrfOptions& opts) {
  ChrfStats st;
  st.counts.assign(3 * static_cast<size_t>(opts.char_order_), 0);
  for (int n = 1; n <= opts.char_order_; ++n) {
    const CharNgramCounts h = char_ngrams(hyp, n), r = char_ngrams(ref, n);
    int64_t hyp_count = 0, ref_count = 0, match = 0;
    for (const auto& [ng, count] : h) {
      hyp_count += count;
      auto it = r.find(ng);
      if (it != r.end()) match += std::min(count, it->second);
    }
    for (const auto& [ng, count] : r) ref_count += count;
    int64_t* c = &st.counts[3 * (n - 1)];
    c[0] = r.empty() ? 0 : hyp_count;  // sacreBLEU: no reference n-grams -> no hypothesis count
    c[1] = ref_count;
    c[2] = match;
  }
  return st;
}

// sacreBLEU's CHRF._compute_f_score (0-100).
double chrf_f_score(const ChrfStats& st, const ChrfOptions& opts) {
  ROSETTA_CHECK(st.counts.size() == 3 * static_cast<size_t>(opts.char_order_), "chrf: ",
                st.counts.size(), " statistics for char_order ", opts.char_order_,
                " (expected 3 per order)");
  constexpr double eps = 1e-16;
  const double factor = opts.beta_ * opts.beta_;
  double eps_score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < opts.char_order_; ++i) {
    const int64_t n_hyp = st.counts[3 * i], n_ref = st.counts[3 * i + 1],
                  n_match = st.counts[3 * i + 2];
    const double prec = n_hyp > 0 ? double(n_match) / double(n_hyp) : eps;
    const double rec = n_ref > 0 ? double(n_match) / double(n_ref) : eps;
    // chrF++.py style: per-order F-scores with eps for empty orders.
    const double denom = factor * prec + rec;
    eps_score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    // sacreBLEU default: average P and R over orders where both sides have n-grams.
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opts.eps_smoothing_) return 100 * eps_score / opts.char_order_;
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return 0.0;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= factor * avg_prec + avg_rec;
  return 100 * score;
}

ChrfStats chrf_stats_impl(std::string_view hyp, const std::vector<std::string>& refs,
                          const ChrfOptions& opts, size_t index) {
  ROSETTA_CHECK(!refs.empty(), "chrf: sentence ", index,
                " has no reference (empty references are not references, as in sacreBLEU)");
  const std::u32string h = chrf_preprocess(hyp, opts, "hypothesis", index);
  ChrfStats best;
  double best_f = -1.0;
  for (const std::string& ref : refs) {
    ChrfStats st = chrf_pair_stats(h, chrf_preprocess(ref, opts, "reference", index), opts);
    const double f = chrf_f_score(st, opts);
    if (f > best_f) {
      best_f = f;
      best = std::move(st);
    }
  }
  return best;
}

std::string format_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------- public API

std::vector<std::string> tokenize_13a(std::string_view line) {
  return tokenize_13a_u32(decode_utf8(line, "line", 0));
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] += o.correct[n];
    total[n] += o.total[n];
  }
  hyp_len += o.hyp_len;
  ref_len += o.ref_len;
  return *this;
}

std::string BleuScore::str() const {
  std::string s = "BLEU = " + format_fixed(score, 2) + " ";
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (n > 0) s += '/';
    s += format_fixed(precisions[n], 1);
  }
  s += " (BP = " + format_fixed(bp, 3) + " ratio = " + format_fixed(ratio, 3) +
       " hyp_len = " + std::to_string(hyp_len) + " ref_len = " + std::to_string(ref_len) + ")";
  return s;
}

BleuStats bleu_stats(std::string_view hyp, const std::vector<std::string>& refs) {
  std::vector<std::string> non_empty;
  for (const std::string& r : refs)
    if (!r.empty()) non_empty.push_back(r);
  return bleu_stats_impl(hyp, non_empty, 0);
}

BleuScore bleu_from_stats(const BleuStats& st) {
  BleuScore r;
  r.counts = st.correct;
  r.totals = st.total;
  r.hyp_len = st.hyp_len;
  r.ref_len = st.ref_len;
  r.ratio = st.ref_len ? double(st.hyp_len) / double(st.ref_len) : 0.0;
  if (st.hyp_len < st.ref_len)
    r.bp = st.hyp_len > 0 ? std::exp(1.0 - double(st.ref_len) / double(st.hyp_len)) : 0.0;
  else
    r.bp = 1.0;

  bool any_match = false;
  for (int64_t c : st.correct) any_match = any_match || c > 0;
  if (!any_match) return r;  // score 0, precisions 0 (sacreBLEU #141)

  // 'exp' smoothing (mteval-v13a): the k-th order without matches gets 1 / 2^k matches.
  double smooth = 1.0;
  bool all_orders = true;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (st.total[n] == 0) {  // no n-grams of this order (nor higher): precision stays 0
      all_orders = false;
      break;
    }
    if (st.correct[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * double(st.total[n]));
    } else {
      r.precisions[n] = 100.0 * double(st.correct[n]) / double(st.total[n]);
    }
  }
  // sacreBLEU takes log(0) as -9999999999, so a zero precision drives the score to exactly 0.
  if (!all_orders) return r;
  double sum_log = 0.0;
  for (double p : r.precisions) sum_log += std::log(p);
  r.score = r.bp * std::exp(sum_log / kBleuMaxOrder);
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  ROSETTA_CHECK(hyps.size() == refs.size(), "corpus_bleu: ", hyps.size(), " hypotheses but ",
                refs.size(), " references");
  ROSETTA_CHECK(!hyps.empty(), "corpus_bleu: empty corpus (0 hypotheses)");
  BleuStats total;
  for (size_t i = 0; i < hyps.size(); ++i) {
    ROSETTA_CHECK(!refs[i].empty(), "corpus_bleu: reference ", i,
                  " is empty (sacreBLEU rejects empty references)");
    total += bleu_stats_impl(hyps[i], {refs[i]}, i);
  }
  return bleu_from_stats(total);
}

BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams) {
  check_corpus("corpus_bleu_multi", hyps.size(), ref_streams);
  BleuStats total;
  for (size_t i = 0; i < hyps.size(); ++i)
    total += bleu_stats_impl(hyps[i], sentence_refs(ref_streams, i), i);
  return bleu_from_stats(total);
}

ChrfStats& ChrfStats::operator+=(const ChrfStats& o) {
  if (counts.empty()) counts.assign(o.counts.size(), 0);
  ROSETTA_CHECK(counts.size() == o.counts.size(), "ChrfStats: adding ", o.counts.size(),
                " statistics to ", counts.size());
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
  return *this;
}

std::string ChrfScore::str() const {
  // sacreBLEU names the score f"chrF{beta}" (beta is an int there) and prints 2 decimals.
  char name[32];
  std::snprintf(name, sizeof(name), "chrF%g", beta);
  return std::string(name) + " = " + format_fixed(score, 2);
}

ChrfStats chrf_stats(std::string_view hyp, const std::vector<std::string>& refs,
                     const ChrfOptions& opts) {
  check_chrf_options(opts);
  std::vector<std::string> non_empty;
  for (const std::string& r : refs)
    if (!r.empty()) non_empty.push_back(r);
  return chrf_stats_impl(hyp, non_empty, opts, 0);
}

ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& opts) {
  check_chrf_options(opts);
  return ChrfScore{chrf_f_score(stats, opts), opts.beta_};
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const ChrfOptions& opts) {
  ROSETTA_CHECK(hyps.size() == refs.size(), "corpus_chrf: ", hyps.size(), " hypotheses but ",
                refs.size(), " references");
  ROSETTA_CHECK(!hyps.empty(), "corpus_chrf: empty corpus (0 hypotheses)");
  check_chrf_options(opts);
  ChrfStats total;
  for (size_t i = 0; i < hyps.size(); ++i) {
    ROSETTA_CHECK(!refs[i].empty(), "corpus_chrf: reference ", i,
                  " is empty (sacreBLEU rejects empty references)");
    total += chrf_stats_impl(hyps[i], {refs[i]}, opts, i);
  }
  return chrf_from_stats(total, opts);
}

ChrfScore corpus_chrf_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const ChrfOptions& opts) {
  check_corpus("corpus_chrf_multi", hyps.size(), ref_streams);
  check_chrf_options(opts);
  ChrfStats total;
  for (size_t i = 0; i < hyps.size(); ++i)
    total += chrf_stats_impl(hyps[i], sentence_refs(ref_streams, i), opts, i);
  return chrf_from_stats(total, opts);
}

}  // namespace rosetta::data
