// Counter-based draws: element i of a tensor gets hash(seed, first + i), so results do not
// depend on the number of threads filling it.
#include "rosetta/core/random.h"

#include <cmath>

#include "strided.h"

namespace rosetta {

namespace {
// Fills a fresh tensor with f(h) for h = hash of each element's counter value.
template <class F>
Tensor fill_hashed(const Generator& g, uint64_t first, const Shape& shape, DType dt, F&& f) {
  Tensor out = Tensor::empty(shape, dt);
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    detail::parallel_for(out.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = T(f(g.hash(first + uint64_t(i))));
    });
  });
  return out;
}
}  // namespace

void Generator::set_shard(int64_t begin, int64_t rows, int64_t total) {
  ROSETTA_CHECK(begin >= 0 && rows > 0 && begin + rows <= total, "Generator::set_shard: rows [",
                begin, ", ", begin + rows, ") outside [0, ", total, ")");
  shard_begin_ = uint64_t(begin);
  shard_rows_ = uint64_t(rows);
  shard_total_ = uint64_t(total);
}

uint64_t Generator::take_shard(uint64_t n) {
  ROSETTA_CHECK(n % shard_rows_ == 0, "Generator: a draw of ", n, " values does not split into the ",
                shard_rows_, " rows of this shard");
  const uint64_t per_row = n / shard_rows_, first = counter_ + per_row * shard_begin_;
  counter_ += per_row * shard_total_;
  return first;
}

Tensor Generator::uniform(const Shape& shape, double lo, double hi, DType dt) {
  ROSETTA_CHECK(lo <= hi, "uniform: lo ", lo, " > hi ", hi);
  const uint64_t first = take(uint64_t(shape.numel()));
  return fill_hashed(*this, first, shape, dt,
                     [lo, hi](uint64_t h) { return lo + (hi - lo) * to_unit(h); });
}

Tensor Generator::normal(const Shape& shape, double mean, double std, DType dt) {
  ROSETTA_CHECK(std >= 0, "normal: negative standard deviation ", std);
  const uint64_t first = take(uint64_t(shape.numel()));
  // Box-Muller from the two 32-bit halves of one hash.
  return fill_hashed(*this, first, shape, dt, [mean, std](uint64_t h) {
    const double u1 = (double(h >> 32) + 1.0) * 0x1.0p-32;  // (0, 1]
    const double u2 = double(h & 0xffffffffu) * 0x1.0p-32;  // [0, 1)
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

Tensor Generator::bernoulli(const Shape& shape, double p, DType dt) {
  ROSETTA_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: probability ", p, " outside [0, 1]");
  const uint64_t first = take(uint64_t(shape.numel()));
  return fill_hashed(*this, first, shape, dt, [p](uint64_t h) { return to_unit(h) < p ? 1.0 : 0.0; });
}

Tensor Generator::dropout_mask(const Shape& shape, double p, DType dt) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  const uint64_t first = take(uint64_t(shape.numel()));
  const double keep = 1.0 / (1.0 - p);
  return fill_hashed(*this, first, shape, dt,
                     [p, keep](uint64_t h) { return to_unit(h) < p ? 0.0 : keep; });
}

Tensor Generator::randint(const Shape& shape, int32_t lo, int32_t hi) {
  ROSETTA_CHECK(lo < hi, "randint: empty range [", lo, ", ", hi, ")");
  const uint64_t first = take(uint64_t(shape.numel()));
  Tensor out = Tensor::empty(shape, DType::i32);
  int32_t* p = out.data<int32_t>();
  const uint64_t span = uint64_t(int64_t(hi) - lo);
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = int32_t(lo + int64_t(hash(first + i) % span));
  return out;
}

}  // namespace rosetta
