// Dropout without a stored mask: dropout, relu_dropout, dropout_add and dropout_backward, each
// keeping element i where dropout_keep(seed, offset + i, p) (ops.h), so that the gradient
// regenerates the forward's mask.
#include <cmath>

#include "backward.h"
#include "rosetta/core/ops.h"
#include "strided.h"

namespace rosetta {

namespace {
// out = x * mask / (1 - p), or added to out (see GradOut): the forward pass and its gradient.
// Relu: max(x, 0) * mask / (1 - p), the same bits as dropout of relu's output, in one pass.
// With a residual r (contiguous, x's shape and dtype; beta 0): out = r + x * mask / (1 - p), the
// same bits as add(r, dropout(x)).
template <bool Relu = false>
void dropout_into(const Tensor& x_in, double p, uint64_t seed, uint64_t offset, const GradOut& dst,
                  const Tensor& residual = Tensor()) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  const Tensor x = x_in.contiguous();
  detail::check_grad_out(dst, x.shape(), x.dtype(), "dropout");
  const bool add_residual = residual.defined();
  if (add_residual)
    ROSETTA_CHECK(residual.shape() == x.shape() && residual.dtype() == x.dtype() && residual.is_contiguous() &&
                      dst.beta == 0,
                  "dropout_add: residual ", residual.shape(), " must be a contiguous ", x.shape());
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* pr = add_residual ? residual.data<T>() : nullptr;
    T* po = dst.out.data<T>();
    const uint32_t key = detail::dropout_key(seed);
    const uint32_t threshold = uint32_t(detail::dropout_threshold(p));  // p < 1: fits
    const T scale = T(1.0 / (1.0 - p));
    detail::with_beta(dst.beta, [&](auto acc) {
      detail::parallel_for(x.numel(), [&](int64_t b, int64_t e) {
        detail::for_counter_runs(key, offset, b, e, [&](int64_t i, uint32_t run, uint32_t lo0, uint32_t hi) {
          const T* xs = px + i;
          T* os = po + i;
          // 32-bit counter, a select on the scale, and loop invariants in locals (not captured
          // references): this form vectorises (vpmulld).
          const T sc = scale, be = T(dst.beta);
          const uint32_t thr = threshold;
          if (pr) {
            const T* rs = pr + i;
            // `+ T(0)`: the product rounded on its own, as dropout's output is before add reads
            // it (see detail::put).
#pragma omp simd
            for (uint32_t j = 0; j < run; ++j) {
              const uint32_t h = detail::fmix32((lo0 + j) * 0x9E3779B1u ^ hi);
              os[j] = rs[j] + (xs[j] * (h >= thr ? sc : T(0)) + T(0));
            }
          } else {
#pragma omp simd
            for (uint32_t j = 0; j < run; ++j) {
              const uint32_t h = detail::fmix32((lo0 + j) * 0x9E3779B1u ^ hi);
              T v = xs[j];
              if constexpr (Relu) v = v > T(0) ? v : T(0);
              detail::put<decltype(acc)::value>(os[j], be, v * (h >= thr ? sc : T(0)));
            }
          }
        });
      });
    });
  });
  dst.out.bump_version();
}
}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dropout_into(x, p, seed, offset, {out, 0.0});
  return out;
}

Tensor relu_dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dropout_into<true>(x, p, seed, offset, {out, 0.0});
  return out;
}

Tensor dropout_add(const Tensor& residual, const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  const Tensor r = residual.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dropout_into(x, p, seed, offset, {out, 0.0}, r);
  return out;
}

void dropout_backward(const Tensor& dy, double p, uint64_t seed, uint64_t offset, const GradOut& dx) {
  if (dx.out.defined()) dropout_into(dy, p, seed, offset, dx);
}

}  // namespace rosetta
