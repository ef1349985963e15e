// Batching: token budget, coverage, padding and masks, shuffling, exact resume.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/random.h"
#include "rosetta/data/batch.h"
#include "rosetta/data/tokenizer.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;
using I32 = std::vector<int32_t>;

namespace {

// n pairs with lengths in [1, max_len]; pair i's tokens are 100 + i so rows can be traced.
std::vector<TokenPair> make_pairs(size_t n, size_t max_len = 30, uint64_t seed = 3) {
  rosetta::Generator g(seed);
  std::vector<TokenPair> pairs(n);
  for (size_t i = 0; i < n; ++i) {
    pairs[i].src.assign(1 + g.next_below(max_len), int32_t(100 + i));
    pairs[i].tgt.assign(1 + g.next_below(max_len), int32_t(100 + i));
  }
  return pairs;
}

std::vector<int64_t> served_order(const EpochPlan& plan) {
  std::vector<int64_t> out;
  for (const auto& b : plan) out.insert(out.end(), b.begin(), b.end());
  return out;
}

void require_same_batch(const Batch& a, const Batch& b) {
  REQUIRE(a.indices == b.indices);
  REQUIRE(a.src.shape() == b.src.shape());
  REQUIRE(a.tgt_in.shape() == b.tgt_in.shape());
  REQUIRE(a.src.to_vector<int32_t>() == b.src.to_vector<int32_t>());
  REQUIRE(a.tgt_in.to_vector<int32_t>() == b.tgt_in.to_vector<int32_t>());
  REQUIRE(a.tgt_out.to_vector<int32_t>() == b.tgt_out.to_vector<int32_t>());
  REQUIRE(a.src_pad.to_vector<int32_t>() == b.src_pad.to_vector<int32_t>());
  REQUIRE(a.tgt_pad.to_vector<int32_t>() == b.tgt_pad.to_vector<int32_t>());
  REQUIRE(a.src_tokens == b.src_tokens);
  REQUIRE(a.tgt_tokens == b.tgt_tokens);
}

}  // namespace

TEST_CASE("batch: collate pads and shifts, masks mark padding", "[data]") {
  const std::vector<TokenPair> pairs = {
      {{11, 12, 13}, {21}},
      {{14}, {22, 23, 24}},
  };
  const Batch b = collate(pairs, {0, 1}, BatchOptions());
  // S = 3, T = 3 + 1
  REQUIRE(b.src.shape() == rosetta::Shape{2, 3});
  REQUIRE(b.tgt_in.shape() == rosetta::Shape{2, 4});
  REQUIRE(b.tgt_out.shape() == rosetta::Shape{2, 4});
  REQUIRE(b.src.dtype() == rosetta::DType::i32);
  REQUIRE(b.src_pad.dtype() == rosetta::DType::i32);
  CHECK(b.src.to_vector<int32_t>() == I32{11, 12, 13, /**/ 14, 0, 0});
  CHECK(b.src_pad.to_vector<int32_t>() == I32{0, 0, 0, /**/ 0, 1, 1});
  CHECK(b.tgt_in.to_vector<int32_t>() == I32{2, 21, 0, 0, /**/ 2, 22, 23, 24});
  CHECK(b.tgt_out.to_vector<int32_t>() == I32{21, 3, 0, 0, /**/ 22, 23, 24, 3});
  CHECK(b.tgt_pad.to_vector<int32_t>() == I32{0, 0, 1, 1, /**/ 0, 0, 0, 0});
  CHECK(b.src_tokens == 4);
  CHECK(b.tgt_tokens == 6);  // (1 + eos) + (3 + eos)
  CHECK(b.indices == std::vector<int64_t>{0, 1});
  CHECK(b.size() == 2);

  // Rows follow the given index order; src_eos appends eos to the source.
  const Batch e = collate(pairs, {1, 0}, BatchOptions().src_eos(true));
  REQUIRE(e.src.shape() == rosetta::Shape{2, 4});
  CHECK(e.src.to_vector<int32_t>() == I32{14, 3, 0, 0, /**/ 11, 12, 13, 3});
  CHECK(e.src_pad.to_vector<int32_t>() == I32{0, 0, 1, 1, /**/ 0, 0, 0, 0});
  CHECK(e.src_tokens == 6);
}

TEST_CASE("batch: every batch respects the token budget", "[data]") {
  const auto pairs = make_pairs(500);
  for (const size_t budget : {31, 64, 100, 257, 1000}) {
    for (const size_t chunk : {0, 1, 50}) {
      const auto opts = BatchOptions().max_tokens(budget).bucket_chunk(chunk).seed(5);
      const EpochPlan plan = plan_epoch(pairs, opts, 0);
      for (const auto& idx : plan) {
        const Batch b = collate(pairs, idx, opts);
        const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
        CAPTURE(budget, chunk, b.size(), S, T);
        REQUIRE(b.size() * std::max(S, T) <= int64_t(budget));
        // S and T are tight: some row fills them.
        int64_t max_s = 0, max_t = 0;
        for (const int64_t i : b.indices) {
          max_s = std::max<int64_t>(max_s, pairs[i].src.size());
          max_t = std::max<int64_t>(max_t, pairs[i].tgt.size() + 1);
        }
        REQUIRE(S == max_s);
        REQUIRE(T == max_t);
      }
    }
  }
  // max_sentences caps B as well.
  for (const auto& idx : plan_epoch(pairs, BatchOptions().max_tokens(100000).max_sentences(7), 0))
    REQUIRE(idx.size() <= 7);
}

TEST_CASE("batch: each pair appears exactly once per epoch", "[data]") {
  const auto pairs = make_pairs(333);
  BatchIterator it(pairs, BatchOptions().max_tokens(128).bucket_chunk(64).seed(11));
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    REQUIRE(it.epoch() == epoch);
    REQUIRE(it.position() == 0);
    std::vector<int64_t> seen;
    const size_t n_batches = it.batches_in_epoch();
    for (size_t k = 0; k < n_batches; ++k) {
      const Batch b = it.next();
      for (int64_t r = 0; r < b.size(); ++r) {
        // Row r holds pair indices[r]: its first source token is 100 + index.
        REQUIRE(b.src.at({r, 0}) == 100 + b.indices[r]);
        seen.push_back(b.indices[r]);
      }
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(pairs.size());
    std::iota(all.begin(), all.end(), 0);
    REQUIRE(seen == all);
  }
}

TEST_CASE("batch: bucketing by length reduces padding", "[data]") {
  // Target lengths follow source lengths, as in real corpora.
  auto pairs = make_pairs(2000);
  rosetta::Generator g(8);
  for (size_t i = 0; i < pairs.size(); ++i)
    pairs[i].tgt.assign(pairs[i].src.size() + g.next_below(3), int32_t(100 + i));
  const auto opts = BatchOptions().max_tokens(256).bucket_chunk(500).seed(1);
  const EpochPlan bucketed = plan_epoch(pairs, opts, 0);
  // The same batch sizes filled with random pairs.
  std::vector<uint32_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0u);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[g.next_below(i)]);
  EpochPlan random;
  size_t at = 0;
  for (const auto& b : bucketed) {
    random.emplace_back(order.begin() + at, order.begin() + at + b.size());
    at += b.size();
  }
  auto padding = [&](const EpochPlan& plan) {
    double pad = 0, total = 0;
    for (const auto& idx : plan) {
      const Batch b = collate(pairs, idx, opts);
      pad += double(b.src.numel() - b.src_tokens + b.tgt_in.numel() - b.tgt_tokens);
      total += double(b.src.numel() + b.tgt_in.numel());
    }
    return pad / total;
  };
  const double bucketed_pad = padding(bucketed), random_pad = padding(random);
  CAPTURE(bucketed_pad, random_pad);
  CHECK(bucketed_pad < 0.25 * random_pad);
}

TEST_CASE("batch: shuffling is deterministic in (seed, epoch)", "[data]") {
  const auto pairs = make_pairs(400);
  const auto opts = BatchOptions().max_tokens(100).bucket_chunk(100);
  const auto a = served_order(plan_epoch(pairs, BatchOptions(opts).seed(1), 0));
  const auto a2 = served_order(plan_epoch(pairs, BatchOptions(opts).seed(1), 0));
  const auto b = served_order(plan_epoch(pairs, BatchOptions(opts).seed(2), 0));
  const auto a_next = served_order(plan_epoch(pairs, BatchOptions(opts).seed(1), 1));
  CHECK(a == a2);
  CHECK(a != b);
  CHECK(a != a_next);  // each epoch reshuffles

  // Without shuffling the order is sorted by length and ignores the seed.
  const auto sorted_opts = BatchOptions().max_tokens(100).shuffle(false);
  const EpochPlan s1 = plan_epoch(pairs, BatchOptions(sorted_opts).seed(1), 0);
  const EpochPlan s2 = plan_epoch(pairs, BatchOptions(sorted_opts).seed(2), 5);
  CHECK(s1 == s2);
  size_t prev = 0;
  for (const int64_t i : served_order(s1)) {
    const size_t w = std::max(pairs[i].src.size(), pairs[i].tgt.size() + 1);
    REQUIRE(w >= prev);
    prev = w;
  }
}

TEST_CASE("batch: save and restore mid-epoch continues identically", "[data]") {
  const auto pairs = make_pairs(300);
  const auto opts = BatchOptions().max_tokens(150).bucket_chunk(80).seed(42);
  BatchIterator reference(pairs, opts);
  BatchIterator stopped(pairs, opts);
  const size_t first_epoch = reference.batches_in_epoch();
  REQUIRE(first_epoch > 10);

  // Stop at several points, including the epoch boundary and just after it.
  for (const size_t stop : {size_t(3), first_epoch - 1, first_epoch, first_epoch + 2}) {
    CAPTURE(stop);
    BatchIterator ref(pairs, opts);
    BatchIterator a(pairs, opts);
    for (size_t k = 0; k < stop; ++k) {
      ref.next();
      a.next();
    }
    const std::string saved = a.state().to_json();
    // A fresh iterator, built with a different seed that the state overrides.
    BatchIterator resumed(pairs, BatchOptions(opts).seed(999));
    resumed.restore(BatchState::from_json(saved));
    CHECK(resumed.state() == ref.state());
    for (size_t k = 0; k < 2 * first_epoch + 5; ++k) require_same_batch(ref.next(), resumed.next());
    CHECK(resumed.state() == ref.state());
  }
}

TEST_CASE("batch: state serialization", "[data]") {
  const BatchState s{3, 17, 0xFFFFFFFFFFFFFFF1ull, 1234};
  const std::string j = s.to_json();
  CHECK(BatchState::from_json(j) == s);  // 64-bit seeds survive
  CHECK_THROWS_WITH(BatchState::from_json("not json"), Contains("BatchState: not JSON"));
  CHECK_THROWS_WITH(BatchState::from_json("[1,2]"), Contains("expected a JSON object"));
  CHECK_THROWS_WITH(BatchState::from_json(R"({"epoch":1,"position":2,"seed":3})"),
                    Contains("missing \"num_pairs\""));
  CHECK_THROWS_WITH(BatchState::from_json(R"({"epoch":-1,"position":2,"seed":3,"num_pairs":4})"),
                    Contains("\"epoch\" must be a non-negative integer"));
}

TEST_CASE("batch: errors name the pair or the state", "[data]") {
  std::vector<TokenPair> pairs = make_pairs(20, 10);
  pairs[7].tgt.assign(50, 5);
  CHECK_THROWS_WITH(BatchIterator(pairs, BatchOptions().max_tokens(40)),
                    Contains("pair 7 needs 51 padded tokens") && Contains("budget is 40"));
  pairs[7].tgt.clear();
  CHECK_THROWS_WITH(BatchIterator(pairs, BatchOptions()), Contains("pair 7 has an empty target"));
  CHECK_THROWS_WITH(BatchIterator({}, BatchOptions()), Contains("no pairs"));

  BatchIterator it(make_pairs(20, 10), BatchOptions().max_tokens(40));
  CHECK_THROWS_WITH(it.restore(BatchState{0, 0, 0, 21}), Contains("state is for 21 pairs"));
  CHECK_THROWS_WITH(it.restore(BatchState{0, 1000, 0, 20}), Contains("position 1000 is past"));
  CHECK(it.position() == 0);  // a failed restore leaves the iterator as it was
}
