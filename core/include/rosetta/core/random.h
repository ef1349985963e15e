// Generator: a seeded, counter-based random number generator owned by the caller.
//
// Element i of a draw is a hash of (seed, counter + i), so a draw is the same whatever the
// thread count, tensors are filled in parallel, and the state is two integers (easy to save
// for exact resume). The hash is splitmix64, whose outputs pass BigCrush when fed a counter.
#pragma once

#include <cstdint>

#include "rosetta/core/tensor.h"

namespace rosetta {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  // Restores a state saved as (seed, counter).
  void set_state(uint64_t seed, uint64_t counter) {
    seed_ = seed;
    counter_ = counter;
  }

  // Uniform in [lo, hi).
  Tensor uniform(const Shape& shape, double lo = 0.0, double hi = 1.0, DType dt = DType::f32);
  // Normal(mean, std) by Box-Muller.
  Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dt = DType::f32);
  // 1 with probability p, else 0.
  Tensor bernoulli(const Shape& shape, double p, DType dt = DType::f32);
  // Inverted-dropout mask: 1/(1-p) with probability 1-p, else 0.
  Tensor dropout_mask(const Shape& shape, double p, DType dt = DType::f32);
  // Uniform integers in [lo, hi), as i32.
  Tensor randint(const Shape& shape, int32_t lo, int32_t hi);

  // Reserves n counter values (for a kernel that draws them itself) and returns the first.
  uint64_t reserve(uint64_t n) { return take(n); }

  // Makes every tensor draw (not the single draws below) the rows [begin, begin + rows) of the
  // same draw over `total` rows along the leading axis: model replicas that train shards of a
  // batch (train/replicas.h) then see the dropout masks of the whole batch, and their counters
  // all end where the whole batch's would. Throws if a draw's size is not a multiple of `rows`.
  void set_shard(int64_t begin, int64_t rows, int64_t total);
  void clear_shard() { shard_total_ = 0; }

  // Single draws, for shuffling and sampling.
  uint64_t next_u64() { return hash(counter_++); }
  double next_double() { return to_unit(next_u64()); }  // [0, 1)
  uint64_t next_below(uint64_t n) { return next_u64() % n; }

  uint64_t hash(uint64_t i) const {
    uint64_t z = seed_ * 0xD1B54A32D192ED03ull + i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static double to_unit(uint64_t x) { return double(x >> 11) * 0x1.0p-53; }

 private:
  // Reserves n counter values and returns the first.
  uint64_t take(uint64_t n) {
    if (shard_total_ > 0) return take_shard(n);
    const uint64_t c = counter_;
    counter_ += n;
    return c;
  }
  uint64_t take_shard(uint64_t n);
  uint64_t seed_;
  uint64_t counter_ = 0;
  uint64_t shard_begin_ = 0, shard_rows_ = 0, shard_total_ = 0;  // total 0: no shard
};

}  // namespace rosetta
