// Softmax, log-softmax and the fused label-smoothed cross-entropy, all over the last axis of a
// tensor viewed as rows [N, V]. Rows run in parallel; each row is three passes (max, sum of
// exponentials, write). A row that is entirely -inf (fully masked) gives zeros, never NaN.
#include <cmath>
#include <limits>

#include "backward.h"
#include "cross_entropy_args.h"
#include "rosetta/core/ops.h"
#include "softmax_row.h"
#include "strided.h"
#include "vecmath.h"

namespace rosetta {

namespace {

// d[j] = scale * (exp(x[j] - l) - uniform) over a row of n: the cross-entropy's gradient before
// its target's term. d may be x (each element is read before it is written). An exp per element:
// it was 7% of a bf16 training step's samples on a 2-core Xeon with AMX, and 512-bit vectors
// (ROSETTA_WIDE_VECTORS) take ~40% off it there.
template <class T>
ROSETTA_WIDE_VECTORS void ce_grad_row(const T* x, T* d, int64_t n, T l, T scale, T uniform) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) d[j] = scale * (detail::vexp(T(x[j] - l)) - uniform);
}

// Work of one softmax element, in the elementwise units of detail::kParallelGrain (exp is
// vectorised: a row costs about two passes over it).
constexpr int64_t kSoftmaxCost = 2;

// log(sum(exp(x - m))) + m, or -inf for a row that is all -inf.
template <class T>
double row_logsumexp(const T* x, int64_t n) {
  const T m = detail::row_max(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return -INFINITY;
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += detail::vexp(T(x[j] - m));
  return double(m) + std::log(double(s));
}

template <bool Log>
Tensor softmax_impl(const Tensor& x_in, const Tensor& mask_in) {
  ROSETTA_CHECK(x_in.dim() >= 1, "softmax: needs at least one dimension");
  const Tensor x = x_in.contiguous();
  Tensor mask;
  if (mask_in.defined()) {
    ROSETTA_CHECK(mask_in.dtype() == DType::i32, "softmax: mask must be I32, got ",
                  dtype_name(mask_in.dtype()));
    mask = mask_in.expand(x.shape());  // throws with both shapes if they do not broadcast
  }
  const int64_t V = x.shape().back(), N = V == 0 ? 0 : x.numel() / V;
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (!mask.defined()) {
      detail::parallel_rows(N, V * kSoftmaxCost, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) detail::softmax_row<Log>(px + i * V, po + i * V, V, nullptr, 0);
      });
    } else {
      // Rows of x are contiguous; each row's mask is found from the broadcast strides.
      const int32_t* pm = mask.data<int32_t>();
      const Shape& ms = mask.strides();
      const int nd = x.dim();
      const int64_t inner = ms[nd - 1];
      detail::parallel_rows(N, V * kSoftmaxCost, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t rem = i, off = 0;
          for (int d = nd - 2; d >= 0; --d) {
            off += (rem % x.shape()[d]) * ms[d];
            rem /= x.shape()[d];
          }
          detail::softmax_row<Log>(px + i * V, po + i * V, V, pm + off, inner);
        }
      });
    }
    return out;
  });
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl<false>(x, Tensor()); }
Tensor softmax(const Tensor& x, const Tensor& mask) { return softmax_impl<false>(x, mask); }

// Fully masked rows give zeros (documented in ops.h); masked entries of a partly masked row
// are -inf.
Tensor log_softmax(const Tensor& x) { return softmax_impl<true>(x, Tensor()); }

namespace {
// dx = y * (dy - dot) with dot = sum(dy * y)       (softmax)
// dx = dy - exp(y) * sum(dy)                       (log-softmax)
template <bool Log>
void softmax_backward_impl(const Tensor& y_in, const Tensor& dy_in, const GradOut& dx) {
  if (!dx.out.defined()) return;
  ROSETTA_CHECK(y_in.shape() == dy_in.shape(), "softmax_backward: shapes ", y_in.shape(), " and ",
                dy_in.shape(), " differ");
  const Tensor y = y_in.contiguous(), dy = dy_in.contiguous();
  detail::check_grad_out(dx, y.shape(), y.dtype(), "softmax_backward");
  const int64_t V = y.shape().back(), N = V == 0 ? 0 : y.numel() / V;
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *py = y.data<T>(), *pd = dy.data<T>(), be = T(dx.beta);
    T* px = dx.out.data<T>();
    detail::with_beta(dx.beta, [&](auto a) {
      constexpr bool Acc = decltype(a)::value;
      detail::parallel_rows(N, V * 4, [&](int64_t b, int64_t e) {
        const T *y_ = py, *dy_ = pd;  // locals, not captured references: faster loops
        const T be_ = be;
        T* dx_ = px;
        for (int64_t i = b; i < e; ++i) {
          const T *yr = y_ + i * V, *dr = dy_ + i * V;
          T* xr = dx_ + i * V;
          double acc = 0;
          if constexpr (Log) {
            for (int64_t j = 0; j < V; ++j) acc += dr[j];
            for (int64_t j = 0; j < V; ++j) detail::put<Acc>(xr[j], be_, dr[j] - detail::vexp(yr[j]) * T(acc));
          } else {
            for (int64_t j = 0; j < V; ++j) acc += double(dr[j]) * yr[j];
            for (int64_t j = 0; j < V; ++j) detail::put<Acc>(xr[j], be_, yr[j] * (dr[j] - T(acc)));
          }
        }
      });
    });
  });
  dx.out.bump_version();
}
}  // namespace

void softmax_backward(const Tensor& y, const Tensor& dy, const GradOut& dx) {
  softmax_backward_impl<false>(y, dy, dx);
}
void log_softmax_backward(const Tensor& y, const Tensor& dy, const GradOut& dx) {
  softmax_backward_impl<true>(y, dy, dx);
}

// ------------------------------------------------------------------ fused cross-entropy

void detail::check_ce_targets(int64_t N, const Tensor& targets, double smoothing) {
  ROSETTA_CHECK(targets.dtype() == DType::i32 && targets.dim() == 1 && targets.shape()[0] == N,
                "cross_entropy: targets must be I32 [", N, "], got ", dtype_name(targets.dtype()), " ",
                targets.shape());
  ROSETTA_CHECK(smoothing >= 0.0 && smoothing < 1.0, "cross_entropy: label smoothing ", smoothing,
                " outside [0, 1)");
}

int64_t detail::count_ce_targets(const int32_t* pt, int64_t N, int64_t V, int32_t ignore_index) {
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (pt[i] == ignore_index) continue;
    ROSETTA_CHECK(pt[i] >= 0 && pt[i] < V, "cross_entropy: target ", pt[i], " at row ", i,
                  " outside [0, ", V, ")");
    ++count;
  }
  return count;
}

namespace {
void check_ce_args(const Tensor& logits, const Tensor& targets, double smoothing) {
  ROSETTA_CHECK(logits.dim() == 2, "cross_entropy: logits must be [N, V], got ", logits.shape());
  detail::check_ce_targets(logits.shape()[0], targets, smoothing);
}
}  // namespace

CrossEntropyResult cross_entropy_forward(const Tensor& logits_in, const Tensor& targets_in,
                                         double smoothing, int32_t ignore_index) {
  check_ce_args(logits_in, targets_in, smoothing);
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  const int32_t* pt = targets.data<int32_t>();
  const int64_t count = detail::count_ce_targets(pt, N, V, ignore_index);
  return dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor lse = Tensor::empty({N}, logits.dtype());
    const T* px = logits.data<T>();
    T* pl = lse.data<T>();
    // Rows are independent; the loss is reduced in double per thread, and the threads' sums in
    // their order (ordered_sum). Inline on a replica's thread: a nested region is a team of one
    // that still costs a trip through the thread pool.
    const double total = detail::ordered_sum(N, N * V >= detail::kParallelGrain, [&](int64_t b, int64_t e) {
      double part = 0;
      for (int64_t i = b; i < e; ++i) {
        const T* row = px + i * V;
        if (pt[i] == ignore_index) {
          pl[i] = T(0);
          continue;
        }
        const double l = row_logsumexp(row, V);
        pl[i] = T(l);
        const double nll = l - row[pt[i]];
        double smooth = 0;
        if (smoothing > 0) {
          T s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t j = 0; j < V; ++j) s += row[j];
          smooth = l - double(s) / double(V);
        }
        part += (1.0 - smoothing) * nll + smoothing * smooth;
      }
      return part;
    });
    const double loss = count > 0 ? total / double(count) : 0.0;
    return CrossEntropyResult{Tensor::scalar(loss, logits.dtype()), lse, count};
  });
}

void cross_entropy_backward(const Tensor& logits_in, const Tensor& targets_in, const Tensor& lse_in,
                            double smoothing, int32_t ignore_index, int64_t count, double g,
                            const GradOut& dlogits) {
  if (!dlogits.out.defined()) return;
  check_ce_args(logits_in, targets_in, smoothing);
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous(), lse = lse_in.contiguous();
  detail::check_grad_out(dlogits, logits.shape(), logits.dtype(), "cross_entropy_backward");
  ROSETTA_CHECK(dlogits.beta == 0 || !dlogits.out.same_storage(logits),
                "cross_entropy_backward: only beta 0 may write over the logits");
  if (dlogits.beta != 0) {
    // Adding to a gradient the logits already have: they are used twice, which is rare, so
    // through a temporary.
    const Tensor fresh = Tensor::empty(logits.shape(), logits.dtype());
    cross_entropy_backward(logits, targets, lse, smoothing, ignore_index, count, g, {fresh});
    expand_backward(fresh, dlogits);
    return;
  }
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *px = logits.data<T>(), *pl = lse.data<T>();
    const int32_t* pt = targets.data<int32_t>();
    T* pd = dlogits.out.data<T>();
    const T scale = count > 0 ? T(g / double(count)) : T(0);
    const T uniform = T(smoothing / double(V)), hit = T(1.0 - smoothing);
    detail::parallel_rows(N, V * 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T* d = pd + i * V;
        if (pt[i] == ignore_index) {
          std::fill(d, d + V, T(0));
          continue;
        }
        // Each element is read before it is written: d may be the row itself.
        ce_grad_row(px + i * V, d, V, pl[i], scale, uniform);
        d[pt[i]] -= scale * hit;
      }
    });
  });
  dlogits.out.bump_version();
}

// ------------------------------------------------------------------ naive references

namespace ref {

Tensor softmax(const Tensor& x) {
  const Tensor xd = x.to(DType::f64).contiguous();
  const int64_t V = xd.shape().back(), N = xd.numel() / std::max<int64_t>(V, 1);
  std::vector<double> out(xd.numel());
  const double* p = xd.data<double>();
  for (int64_t i = 0; i < N; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, p[i * V + j]);
    for (int64_t j = 0; j < V; ++j) s += m == -INFINITY ? 0 : std::exp(p[i * V + j] - m);
    for (int64_t j = 0; j < V; ++j)
      out[i * V + j] = m == -INFINITY ? 0 : std::exp(p[i * V + j] - m) / s;
  }
  return Tensor::from_vector(out, xd.shape()).to(x.dtype());
}

Tensor log_softmax(const Tensor& x) {
  const Tensor sm = ref::softmax(x.to(DType::f64));
  const Tensor xd = x.to(DType::f64).contiguous();
  const int64_t V = xd.shape().back(), N = xd.numel() / std::max<int64_t>(V, 1);
  std::vector<double> out(xd.numel());
  const double *p = xd.data<double>(), *s = sm.data<double>();
  for (int64_t i = 0; i < N; ++i) {
    bool masked = true;
    for (int64_t j = 0; j < V; ++j) masked = masked && p[i * V + j] == -INFINITY;
    for (int64_t j = 0; j < V; ++j) out[i * V + j] = masked ? 0 : std::log(s[i * V + j]);
  }
  return Tensor::from_vector(out, xd.shape()).to(x.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                     int32_t ignore_index) {
  const Tensor lp = ref::log_softmax(logits.to(DType::f64));
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t t = int32_t(targets.at({i}));
    if (t == ignore_index) continue;
    double mean_lp = 0;
    for (int64_t j = 0; j < V; ++j) mean_lp += lp.at({i, j}) / double(V);
    total += -(1 - smoothing) * lp.at({i, t}) - smoothing * mean_lp;
    ++count;
  }
  return Tensor::scalar(count ? total / double(count) : 0.0, logits.dtype());
}

}  // namespace ref

}  // namespace rosetta
