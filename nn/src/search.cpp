#include "rosetta/nn/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "rosetta/core/ops.h"

namespace rosetta::nn {

namespace {

// One live beam: which sentence it belongs to, its tokens so far and its log-probability.
struct Beam {
  int64_t sentence;
  std::vector<int32_t> tokens;
  double log_prob;
};

double normalised(double log_prob, size_t length, double alpha) {
  return log_prob / std::pow(double(std::max<size_t>(length, 1)), alpha);
}

// The tokens that would complete an n-gram `tokens` already holds: those that followed an
// earlier occurrence of its last n - 1 tokens.
std::vector<int32_t> repeating_tokens(const std::vector<int32_t>& tokens, int n) {
  std::vector<int32_t> banned;
  const size_t m = size_t(n - 1), len = tokens.size();
  if (n <= 0 || len < m) return banned;
  for (size_t s = 0; s + m < len; ++s)  // an occurrence at [s, s + m) followed by tokens[s + m]
    if (std::equal(tokens.begin() + std::ptrdiff_t(s), tokens.begin() + std::ptrdiff_t(s + m),
                   tokens.end() - std::ptrdiff_t(m)))
      banned.push_back(tokens[s + m]);
  return banned;
}

// The `keep` largest finite entries of row[0, V) as (value, index), largest first (of equal
// values, the lower index first): one pass, most entries rejected by one comparison with the
// smallest kept.
void top_finite(const float* __restrict row, int64_t V, size_t keep, std::vector<std::pair<float, int32_t>>& out) {
  out.clear();
  if (keep == 0) return;
  constexpr int64_t kBlock = 16;
  float smallest = -std::numeric_limits<float>::infinity();
  for (int64_t j0 = 0; j0 < V; j0 += kBlock) {
    const int64_t j1 = std::min(V, j0 + kBlock);
    float block_max = -std::numeric_limits<float>::infinity();  // NaN never wins the comparison
#pragma omp simd reduction(max : block_max)
    for (int64_t j = j0; j < j1; ++j) block_max = row[j] > block_max ? row[j] : block_max;
    if (!(block_max > smallest)) continue;  // most blocks: nothing here enters the top
    for (int64_t j = j0; j < j1; ++j) {
      const float v = row[j];
      if (!(v > smallest) || v == std::numeric_limits<float>::infinity()) continue;  // also NaN
      auto at = std::find_if(out.begin(), out.end(), [v](const std::pair<float, int32_t>& e) { return e.first < v; });
      out.insert(at, {v, int32_t(j)});
      if (out.size() > keep) out.pop_back();
      if (out.size() == keep) smallest = out.back().first;
    }
  }
}

}  // namespace

std::vector<std::vector<Hypothesis>> search(const Transformer& model, const Tensor& src,
                                            const SearchOptions& o) {
  ROSETTA_CHECK(src.dim() == 2 && src.dtype() == DType::i32, "search: source must be I32 [B, S], got ",
                src.shape());
  ROSETTA_CHECK(o.beam() >= 1 && o.n_best() >= 1 && o.n_best() <= o.beam(), "search: beam ",
                o.beam(), " and n_best ", o.n_best(), " must satisfy 1 <= n_best <= beam");
  ROSETTA_CHECK(o.no_repeat_ngram() >= 0, "search: no_repeat_ngram must not be negative, got ", o.no_repeat_ngram());
  // (NaN fails these too: it would score every hypothesis NaN, or cut every one to a token.)
  ROSETTA_CHECK(o.length_penalty() >= 0 && std::isfinite(o.length_penalty()),
                "search: length_penalty must be finite and non-negative, got ", o.length_penalty());
  ROSETTA_CHECK(o.max_len_a() >= 0 && std::isfinite(o.max_len_a()) && o.max_len_b() >= 0,
                "search: max_len_a and max_len_b must be finite and non-negative, got ", o.max_len_a(), " and ",
                o.max_len_b());
  NoGradGuard no_grad;
  // Every step multiplies by the same weights: in bf16, pack them once for the whole search.
  const PackedWeightsScope packed_weights;
  const int64_t B = src.shape()[0], S = src.shape()[1], K = o.beam();
  const int32_t pad = model.options().pad_id();
  if (B == 0) return {};

  // Per-sentence length limits from the real (unpadded) source lengths.
  std::vector<int64_t> limit(B);
  {
    const Tensor c = src.contiguous();
    const int32_t* p = c.data<int32_t>();
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = 0;
      for (int64_t s = 0; s < S; ++s) len += p[b * S + s] != pad;
      limit[b] = std::min<int64_t>(int64_t(o.max_len_a() * double(len)) + o.max_len_b(),
                                   model.options().max_len() - 1);
      limit[b] = std::max<int64_t>(limit[b], 1);
    }
  }
  const int64_t max_steps = *std::max_element(limit.begin(), limit.end());

  // Start with one beam per sentence (the others would be duplicates).
  DecoderState state = model.start(src, max_steps + 1);
  std::vector<Beam> beams;
  for (int64_t b = 0; b < B; ++b) beams.push_back({b, {}, 0.0});
  std::vector<std::vector<Hypothesis>> finished(B);
  std::vector<bool> done(B, false);

  for (int64_t t = 0; t < max_steps && !beams.empty(); ++t) {
    std::vector<int32_t> last(beams.size());
    for (size_t i = 0; i < beams.size(); ++i)
      last[i] = beams[i].tokens.empty() ? o.bos() : beams[i].tokens.back();
    const Tensor logp = log_softmax(model.step(state, Tensor::from_vector(last)).data());
    const int64_t V = logp.shape()[1];
    const float* lp = logp.data<float>();

    // Candidates per sentence: the best 2K continuations over its live beams, so that K
    // non-eos continuations remain even if up to K of them end the sentence.
    std::vector<Beam> next;
    std::vector<int32_t> rows;  // state row each new beam continues
    size_t i = 0;
    while (i < beams.size()) {
      const int64_t sent = beams[i].sentence;
      size_t j = i;
      while (j < beams.size() && beams[j].sentence == sent) ++j;
      struct Cand {
        double lp;
        size_t row;
        int32_t tok;
      };
      std::vector<Cand> cands;
      const size_t keep = size_t(std::min<int64_t>(2 * K, int64_t(j - i) * V));
      std::vector<float> masked;
      std::vector<std::pair<float, int32_t>> top;
      for (size_t r = i; r < j; ++r) {
        const float* row = lp + r * V;
        const std::vector<int32_t> banned = repeating_tokens(beams[r].tokens, o.no_repeat_ngram());
        if (!banned.empty()) {
          masked.assign(row, row + V);
          for (int32_t tok : banned) masked[size_t(tok)] = -std::numeric_limits<float>::infinity();
          row = masked.data();
        }
        // The top `keep` tokens of this row are enough: no other can be in the overall top.
        top_finite(row, V, keep, top);
        for (const auto& [value, tok] : top) cands.push_back({beams[r].log_prob + value, r, tok});
      }
      std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.lp > b.lp; });
      const bool last_step = t + 1 >= limit[sent];
      int64_t kept = 0;
      for (size_t c = 0; c < cands.size() && kept < K; ++c) {
        const Cand& cd = cands[c];
        if (o.stop_at_eos() && cd.tok == o.eos()) {
          if (int64_t(c) < K) {  // an eos among the top K ends a hypothesis
            Hypothesis h{beams[cd.row].tokens, 0.0, cd.lp};
            h.score = normalised(cd.lp, h.tokens.size() + 1, o.length_penalty());
            finished[sent].push_back(std::move(h));
          }
          continue;
        }
        Beam nb{sent, beams[cd.row].tokens, cd.lp};
        nb.tokens.push_back(cd.tok);
        if (last_step) {  // out of length: the beam ends here without eos
          Hypothesis h{nb.tokens, normalised(cd.lp, nb.tokens.size(), o.length_penalty()), cd.lp};
          finished[sent].push_back(std::move(h));
        } else {
          next.push_back(std::move(nb));
          rows.push_back(int32_t(cd.row));
        }
        ++kept;
      }
      if (int64_t(finished[sent].size()) >= K || last_step) {
        done[sent] = true;
        // Drop this sentence's new beams.
        while (!next.empty() && next.back().sentence == sent) {
          next.pop_back();
          rows.pop_back();
        }
      }
      i = j;
    }
    beams = std::move(next);
    if (!beams.empty()) state.select(Tensor::from_vector(rows));
  }
  for (const Beam& b : beams)  // only reachable when max_steps ran out
    finished[b.sentence].push_back(
        {b.tokens, normalised(b.log_prob, b.tokens.size(), o.length_penalty()), b.log_prob});

  for (auto& f : finished) {
    std::stable_sort(f.begin(), f.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (int64_t(f.size()) > o.n_best()) f.resize(size_t(o.n_best()));
  }
  return finished;
}

}  // namespace rosetta::nn
