// Token-budget batching with length bucketing and a resumable epoch iterator.
#include "rosetta/data/batch.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <tuple>

#include "rosetta/core/check.h"
#include "rosetta/core/random.h"
#include "rosetta/data/tokenizer.h"

namespace rosetta::data {

namespace {

// Padded widths a pair needs: S (source, + eos when asked) and T (target + bos/eos shift).
size_t src_len(const TokenPair& p, const BatchOptions& o) { return p.src.size() + o.src_eos_; }
size_t tgt_len(const TokenPair& p) { return p.tgt.size() + 1; }

template <class T>
void fisher_yates(std::vector<T>& v, Generator& g) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[g.next_below(i)]);
}

void check_pairs(const std::vector<TokenPair>& pairs, const BatchOptions& o) {
  ROSETTA_CHECK(o.max_tokens_ > 0, "batching: max_tokens must be positive");
  ROSETTA_CHECK(pairs.size() <= UINT32_MAX, "batching: ", pairs.size(), " pairs is too many");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const TokenPair& p = pairs[i];
    ROSETTA_CHECK(!p.src.empty() && !p.tgt.empty(), "batching: pair ", i, " has an empty ",
                  p.src.empty() ? "source" : "target", " (filter_by_tokens removes these)");
    const size_t w = std::max(src_len(p, o), tgt_len(p));
    ROSETTA_CHECK(w <= o.max_tokens_, "batching: pair ", i, " needs ", w,
                  " padded tokens (source ", p.src.size(), ", target ", p.tgt.size(),
                  " + 1) but the token budget is ", o.max_tokens_,
                  "; filter long pairs with filter_by_tokens");
  }
}

}  // namespace

EpochPlan plan_epoch(const std::vector<TokenPair>& pairs, const BatchOptions& o,
                     uint64_t epoch) {
  check_pairs(pairs, o);
  std::vector<uint32_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0u);

  // One generator per epoch, seeded from (seed, epoch): any epoch can be rebuilt on its own.
  Generator g(Generator(o.seed_).hash(epoch));
  if (o.shuffle_) fisher_yates(order, g);

  const size_t chunk = (o.bucket_chunk_ == 0 || !o.shuffle_) ? order.size() : o.bucket_chunk_;
  auto key = [&](uint32_t i) {
    const size_t s = src_len(pairs[i], o), t = tgt_len(pairs[i]);
    return std::tuple(std::max(s, t), s, t);
  };
  EpochPlan plan;
  for (size_t begin = 0; begin < order.size(); begin += chunk) {
    const auto b = order.begin() + ptrdiff_t(begin);
    const auto e = order.begin() + ptrdiff_t(std::min(order.size(), begin + chunk));
    std::stable_sort(b, e, [&](uint32_t x, uint32_t y) { return key(x) < key(y); });
    // Greedy: grow the batch while B * max(S, T) stays within the budget.
    std::vector<uint32_t> cur;
    size_t width = 0;
    for (auto it = b; it != e; ++it) {
      const size_t w = std::max({width, src_len(pairs[*it], o), tgt_len(pairs[*it])});
      const bool full = (cur.size() + 1) * w > o.max_tokens_ ||
                        (o.max_sentences_ && cur.size() + 1 > o.max_sentences_);
      if (full && !cur.empty()) {
        plan.push_back(std::move(cur));
        cur.clear();
        width = 0;
      }
      cur.push_back(*it);
      width = std::max({width, src_len(pairs[*it], o), tgt_len(pairs[*it])});
    }
    if (!cur.empty()) plan.push_back(std::move(cur));
  }
  if (o.shuffle_) fisher_yates(plan, g);
  return plan;
}

Batch collate(const std::vector<TokenPair>& pairs, const std::vector<uint32_t>& indices,
              const BatchOptions& o) {
  ROSETTA_CHECK(!indices.empty(), "collate: no pairs");
  const int64_t B = int64_t(indices.size());
  size_t S = 0, T = 0;
  for (const uint32_t i : indices) {
    ROSETTA_CHECK(i < pairs.size(), "collate: pair index ", i, " out of range (", pairs.size(),
                  " pairs)");
    S = std::max(S, src_len(pairs[i], o));
    T = std::max(T, tgt_len(pairs[i]));
  }
  std::vector<int32_t> src(B * S, kPadId), tgt_in(B * T, kPadId), tgt_out(B * T, kPadId);
  std::vector<int32_t> src_pad(B * S, 1), tgt_pad(B * T, 1);
  Batch batch;
  batch.indices.assign(indices.begin(), indices.end());
  for (int64_t b = 0; b < B; ++b) {
    const TokenPair& p = pairs[indices[b]];
    // src[b] = x_1 .. x_n [eos]
    for (size_t s = 0; s < p.src.size(); ++s) src[b * S + s] = p.src[s];
    if (o.src_eos_) src[b * S + p.src.size()] = kEosId;
    const size_t ns = src_len(p, o);
    std::fill_n(src_pad.begin() + b * S, ns, 0);
    // tgt_in[b] = bos y_1 .. y_m ; tgt_out[b] = y_1 .. y_m eos
    const size_t m = p.tgt.size();
    tgt_in[b * T] = kBosId;
    for (size_t t = 0; t < m; ++t) {
      tgt_in[b * T + t + 1] = p.tgt[t];
      tgt_out[b * T + t] = p.tgt[t];
    }
    tgt_out[b * T + m] = kEosId;
    std::fill_n(tgt_pad.begin() + b * T, m + 1, 0);
    batch.src_tokens += int64_t(ns);
    batch.tgt_tokens += int64_t(m + 1);
  }
  const Shape ss{B, int64_t(S)}, ts{B, int64_t(T)};
  batch.src = Tensor::from_vector(src, ss);
  batch.tgt_in = Tensor::from_vector(tgt_in, ts);
  batch.tgt_out = Tensor::from_vector(tgt_out, ts);
  batch.src_pad = Tensor::from_vector(src_pad, ss);
  batch.tgt_pad = Tensor::from_vector(tgt_pad, ts);
  return batch;
}

// ---------------------------------------------------------------- BatchState

std::string BatchState::to_json() const {
  const nlohmann::json j = {
      {"epoch", epoch}, {"position", position}, {"seed", seed}, {"num_pairs", num_pairs}};
  return j.dump();
}

BatchState BatchState::from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ROSETTA_FAIL("BatchState: not JSON: ", e.what());
  }
  ROSETTA_CHECK(j.is_object(), "BatchState: expected a JSON object, got ", j.dump());
  BatchState s;
  auto get = [&](const char* key, uint64_t& out) {
    ROSETTA_CHECK(j.contains(key), "BatchState: missing \"", key, "\" in ", j.dump());
    ROSETTA_CHECK(j[key].is_number_unsigned(), "BatchState: \"", key,
                  "\" must be a non-negative integer in ", j.dump());
    out = j[key].get<uint64_t>();
  };
  get("epoch", s.epoch);
  get("position", s.position);
  get("seed", s.seed);
  get("num_pairs", s.num_pairs);
  return s;
}

// ---------------------------------------------------------------- BatchIterator

BatchIterator::BatchIterator(std::vector<TokenPair> pairs, const BatchOptions& options)
    : pairs_(std::move(pairs)), options_(options) {
  ROSETTA_CHECK(!pairs_.empty(), "BatchIterator: no pairs");
  check_pairs(pairs_, options_);
  load_epoch(0);
}

void BatchIterator::load_epoch(uint64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  resample(epoch);
  plan_ = plan_epoch(pairs_, options_, epoch);
}

void BatchIterator::resample(uint64_t epoch) {
  if (!resample_) return;
  std::vector<TokenPair> pairs = resample_(epoch);
  ROSETTA_CHECK(pairs.size() == pairs_.size(), "BatchIterator: the resampler gave ", pairs.size(),
                " pairs for a corpus of ", pairs_.size());
  check_pairs(pairs, options_);
  pairs_ = std::move(pairs);
}

void BatchIterator::set_resampler(Resampler resample) {
  ROSETTA_CHECK(position_ == 0, "BatchIterator::set_resampler: set it before the first batch of an epoch");
  resample_ = std::move(resample);
  load_epoch(epoch_);
}

Batch BatchIterator::next() {
  Batch b = collate(pairs_, plan_[position_], options_);
  if (++position_ == plan_.size()) load_epoch(epoch_ + 1);
  return b;
}

BatchState BatchIterator::state() const {
  return BatchState{epoch_, position_, options_.seed_, pairs_.size()};
}

void BatchIterator::restore(const BatchState& s) {
  ROSETTA_CHECK(s.num_pairs == pairs_.size(), "BatchIterator::restore: state is for ",
                s.num_pairs, " pairs, this corpus has ", pairs_.size());
  BatchOptions o = options_;
  o.seed_ = s.seed;
  resample(s.epoch);
  const EpochPlan plan = plan_epoch(pairs_, o, s.epoch);
  ROSETTA_CHECK(s.position < plan.size(), "BatchIterator::restore: position ", s.position,
                " is past the end of epoch ", s.epoch, " (", plan.size(), " batches)");
  options_ = o;
  epoch_ = s.epoch;
  position_ = s.position;
  plan_ = plan;
}

}  // namespace rosetta::data
