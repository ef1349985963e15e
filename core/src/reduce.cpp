// Reductions along one axis: the input is viewed as [outer, n, inner] and reduced over n.
// Sums accumulate in double. inner == 1 (last axis) reduces contiguous rows; otherwise blocks of
// inner columns are reduced together so the loads stay contiguous (64 columns for max and argmax,
// a thread's share for sums: sum_columns).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backward.h"
#include "rosetta/core/ops.h"
#include "strided.h"

namespace rosetta {

namespace {

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
  Shape out_keepdim;
};

Split split_at(const Shape& shape, int axis) {
  Split s;
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.n = shape[axis];
  for (int d = axis + 1; d < shape.size(); ++d) s.inner *= shape[d];
  s.out_keepdim = shape;
  s.out_keepdim[axis] = 1;
  return s;
}

Tensor finish(Tensor out, int axis, bool keepdim) { return keepdim ? out : out.squeeze(axis); }

constexpr int64_t kBlock = 64;

// Generic reduction driver: for every (outer, inner) output, folds the n inputs with `step`
// starting from `init`, then stores `fin(acc, arg)` to the output with store(out_element, value)
// (by default, assigns it).
struct Assign {
  template <class Out, class V>
  void operator()(Out& o, V v) const { o = v; }
};

template <class T, class Acc, class Out, class Step, class Fin, class Store = Assign>
void reduce_axis(const T* x, Out* out, const Split& s, Acc init, Step step, Fin fin, Store store = {}) {
  if (s.inner == 1) {
    detail::parallel_rows(s.outer, s.n, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = x + o * s.n;
        Acc acc = init;
        int64_t arg = 0;
        for (int64_t j = 0; j < s.n; ++j) step(acc, arg, row[j], j);
        store(out[o], fin(acc, arg));
      }
    });
    return;
  }
  const int64_t nblocks = (s.inner + kBlock - 1) / kBlock;
  detail::parallel_rows(s.outer * nblocks, s.n * kBlock, [&](int64_t b, int64_t e) {
    Acc acc[kBlock];
    int64_t arg[kBlock];
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / nblocks, i0 = (t % nblocks) * kBlock;
      const int64_t w = std::min(kBlock, s.inner - i0);
      for (int64_t k = 0; k < w; ++k) {
        acc[k] = init;
        arg[k] = 0;
      }
      const T* base = x + o * s.n * s.inner + i0;
      for (int64_t j = 0; j < s.n; ++j) {
        const T* row = base + j * s.inner;
        for (int64_t k = 0; k < w; ++k) step(acc[k], arg[k], row[k], j);
      }
      for (int64_t k = 0; k < w; ++k) store(out[o * s.inner + i0 + k], fin(acc[k], arg[k]));
    }
  });
}

// Sums over n, in double, for inner > 1: each output's n terms added in the order j = 0, 1, ...
// as reduce_axis adds them (the same bits), then store(output index, sum). Threads take blocks of
// columns (of every outer index) wide enough for one or two per thread, at most kSumCols; each
// block's accumulators stay in L1 while x is read a row of the block at a time. (reduce_axis
// walked 64-column blocks down the rows, its accumulators on the stack: a linear layer's fp32
// bias gradient, a column sum of dy, took 2.4% of the default translator's fp32 step.)
constexpr int64_t kSumCols = 1024;

template <class T, class Store>
void sum_columns(const T* x, const Split& s, Store store) {
  const int64_t threads = omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());  // as parallel_for splits
  const int64_t per_thread = (s.inner + threads - 1) / threads;
  const int64_t width = std::min(kSumCols, std::max<int64_t>(16, (per_thread + 15) / 16 * 16));
  const int64_t nblocks = (s.inner + width - 1) / width;
  detail::parallel_rows(s.outer * nblocks, s.n * width, [&](int64_t b, int64_t e) {
    alignas(64) double acc[kSumCols];
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / nblocks, i0 = (t % nblocks) * width;
      const int64_t w = std::min(width, s.inner - i0);
      double* a = acc;  // a local pointer, not the array captured: the loop vectorises
      for (int64_t k = 0; k < w; ++k) a[k] = 0.0;
      const T* base = x + o * s.n * s.inner + i0;
      for (int64_t j = 0; j < s.n; ++j) {
        const T* row = base + j * s.inner;
#pragma omp simd
        for (int64_t k = 0; k < w; ++k) a[k] += double(row[k]);
      }
      for (int64_t k = 0; k < w; ++k) store(o * s.inner + i0 + k, a[k]);
    }
  });
}

}  // namespace

namespace detail {
double ordered_sum(int64_t n, bool parallel, const std::function<double(int64_t, int64_t)>& partial) {
  if (!parallel || n <= 1 || omp_get_max_threads() == 1 || omp_in_parallel()) return 0.0 + partial(0, n);
  std::vector<double> parts(size_t(omp_get_max_threads()), 0.0);
  int used = 1;
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t q = n / nt, r = n % nt;  // the first r chunks one longer, as schedule(static)
    const int64_t b = t * q + std::min(t, r), e = b + q + (t < r ? 1 : 0);
    parts[size_t(t)] = b < e ? partial(b, e) : 0.0;
    if (t == 0) used = int(nt);
  }
  double s = 0.0;
  for (int t = 0; t < used; ++t) s += parts[size_t(t)];
  return s;
}
}  // namespace detail

Tensor sum(const Tensor& x_in, int axis, bool keepdim) {
  axis = normalize_axis(axis, x_in.dim());
  const Tensor x = x_in.contiguous();
  const Split s = split_at(x.shape(), axis);
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(s.out_keepdim, x.dtype());
    T* po = out.data<T>();
    if (s.inner > 1) sum_columns(x.data<T>(), s, [po](int64_t i, double a) { po[i] = T(a); });
    else
      reduce_axis<T, double>(
          x.data<T>(), po, s, 0.0, [](double& a, int64_t&, T v, int64_t) { a += v; },
          [](double a, int64_t) { return T(a); });
    return finish(out, axis, keepdim);
  });
}

Tensor sum(const Tensor& x, const std::vector<int>& axes_in, bool keepdim) {
  std::vector<int> axes;
  for (int a : axes_in) axes.push_back(normalize_axis(a, x.dim()));
  std::sort(axes.begin(), axes.end());
  Tensor out = x;
  for (int a : axes) out = sum(out, a, true);
  if (!keepdim)
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) out = out.squeeze(*it);
  return out.defined() && out.same_storage(x) ? out.clone() : out;
}

Tensor sum_all(const Tensor& x) {
  if (x.dim() == 0) return x.clone();
  return sum(x.reshape({x.numel()}), 0, false);
}

Tensor mean(const Tensor& x, int axis, bool keepdim) {
  const int64_t n = x.size(axis);
  return affine(sum(x, axis, keepdim), 1.0 / double(n), 0.0);
}

Tensor mean_all(const Tensor& x) {
  return affine(sum_all(x), 1.0 / double(std::max<int64_t>(x.numel(), 1)), 0.0);
}

Tensor max(const Tensor& x_in, int axis, bool keepdim) {
  axis = normalize_axis(axis, x_in.dim());
  ROSETTA_CHECK(x_in.size(axis) > 0, "max: empty axis ", axis, " of shape ", x_in.shape());
  const Tensor x = x_in.contiguous();
  const Split s = split_at(x.shape(), axis);
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(s.out_keepdim, x.dtype());
    reduce_axis<T, T>(
        x.data<T>(), out.data<T>(), s, -std::numeric_limits<T>::infinity(),
        [](T& a, int64_t&, T v, int64_t) { a = v > a ? v : a; }, [](T a, int64_t) { return a; });
    return finish(out, axis, keepdim);
  });
}

Tensor argmax(const Tensor& x_in, int axis, bool keepdim) {
  axis = normalize_axis(axis, x_in.dim());
  ROSETTA_CHECK(x_in.size(axis) > 0, "argmax: empty axis ", axis, " of shape ", x_in.shape());
  const Tensor x = x_in.contiguous();
  const Split s = split_at(x.shape(), axis);
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(s.out_keepdim, DType::i32);
    // First index of the maximum; a NaN never wins.
    reduce_axis<T, T>(
        x.data<T>(), out.data<int32_t>(), s, -std::numeric_limits<T>::infinity(),
        [](T& a, int64_t& arg, T v, int64_t j) {
          if (v > a || (j == 0 && !(v < a))) {
            a = v;
            arg = j;
          }
        },
        [](T, int64_t arg) { return int32_t(arg); });
    return finish(out, axis, keepdim);
  });
}

namespace {
// The axes of x that sum_to(x, shape) sums over, ascending.
std::vector<int> broadcast_axes(const Shape& from, const Shape& shape) {
  ROSETTA_CHECK(from.size() >= shape.size(), "sum_to: cannot reduce ", from, " to ", shape);
  const int lead = from.size() - shape.size();
  std::vector<int> axes;
  for (int d = 0; d < from.size(); ++d) {
    if (d < lead) axes.push_back(d);
    else if (shape[d - lead] == 1 && from[d] != 1) axes.push_back(d);
    else
      ROSETTA_CHECK(shape[d - lead] == from[d], "sum_to: cannot reduce ", from, " to ", shape);
  }
  return axes;
}
}  // namespace

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  Tensor out = Tensor::empty(shape, x.dtype());
  expand_backward(x, {out, 0.0});
  return out;
}

// As sum(x, axes): one axis after another, each sum rounded to T; the last one into dst.
void expand_backward(const Tensor& x_in, const GradOut& dst, double alpha) {
  if (!dst.out.defined()) return;
  const std::vector<int> axes = broadcast_axes(x_in.shape(), dst.out.shape());
  detail::check_grad_out(dst, dst.out.shape(), x_in.dtype(), "expand_backward");
  Tensor x = x_in;
  for (size_t k = 0; k + 1 < axes.size(); ++k) x = sum(x, axes[k], true);
  x = x.contiguous();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T al = T(alpha), be = T(dst.beta);
    const T* px = x.data<T>();
    T* po = dst.out.data<T>();
    detail::with_beta(dst.beta, [&](auto acc) {
      constexpr bool Acc = decltype(acc)::value;
      if (axes.empty()) {  // nothing to reduce: out = beta * out + alpha * x
        detail::parallel_for(x.numel(), [&](int64_t b, int64_t e) {
          const T* x_ = px;  // locals, not captured references: the loop vectorises
          T* out = po;
          const T al_ = al, be_ = be;
#pragma omp simd
          for (int64_t i = b; i < e; ++i) detail::put<Acc>(out[i], be_, al_ * x_[i]);
        });
        return;
      }
      const Split s = split_at(x.shape(), axes.back());
      if (s.inner > 1) {
        sum_columns(px, s, [po, al, be](int64_t i, double a) { detail::put<Acc>(po[i], be, al * T(a)); });
        return;
      }
      reduce_axis<T, double>(
          px, po, s, 0.0, [](double& a, int64_t&, T v, int64_t) { a += v; }, [](double a, int64_t) { return T(a); },
          [al, be](T& o, T v) { detail::put<Acc>(o, be, al * v); });
    });
  });
  dst.out.bump_version();
}

void max_backward(const Tensor& dy_in, const Tensor& idx_in, int axis, const GradOut& dx) {
  if (!dx.out.defined()) return;
  const Shape& shape = dx.out.shape();
  axis = normalize_axis(axis, shape.size());
  Shape keep = shape;
  keep[axis] = 1;
  ROSETTA_CHECK(dy_in.shape() == keep && idx_in.shape() == keep && idx_in.dtype() == DType::i32,
                "max_backward: dy ", dy_in.shape(), " and idx ", idx_in.shape(), " must be ", keep);
  detail::check_grad_out(dx, shape, dy_in.dtype(), "max_backward");
  const Tensor dy = dy_in.contiguous(), idx = idx_in.contiguous();
  // Everything but the maxima is beta * out.
  Tensor out = dx.out;
  if (dx.beta == 0) out.zero_();
  else if (dx.beta != 1) scale_(out, dx.beta);
  const Split s = split_at(shape, axis);
  dispatch_float(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ps = dy.data<T>();
    const int32_t* pi = idx.data<int32_t>();
    T* po = out.data<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int32_t j = pi[o * s.inner + i];
        ROSETTA_CHECK(j >= 0 && j < s.n, "max_backward: index ", j, " outside [0, ", s.n, ")");
        po[(o * s.n + j) * s.inner + i] += ps[o * s.inner + i];
      }
  });
  out.bump_version();
}

// ------------------------------------------------------------------ naive references

namespace ref {

namespace {
// Calls f(out_index, values along axis) for every output position.
template <class F>
void along_axis(const Tensor& x, int axis, F&& f) {
  Shape out_shape = x.shape();
  out_shape[axis] = 1;
  detail::for_each_index(out_shape, [&](const std::vector<int64_t>& idx) {
    std::vector<double> vals;
    std::vector<int64_t> j = idx;
    for (int64_t k = 0; k < x.shape()[axis]; ++k) {
      j[axis] = k;
      vals.push_back(x.at(j));
    }
    f(vals);
  });
}

template <class F>
Tensor reduce_ref(const Tensor& x, int axis, bool keepdim, DType dt, F&& f) {
  axis = normalize_axis(axis, x.dim());
  Shape out_shape = x.shape();
  out_shape[axis] = 1;
  std::vector<double> out;
  along_axis(x, axis, [&](const std::vector<double>& v) { out.push_back(f(v)); });
  Tensor t = Tensor::from_vector(out, out_shape).to(dt);
  return keepdim ? t : t.squeeze(axis);
}
}  // namespace

Tensor sum(const Tensor& x, int axis, bool keepdim) {
  return reduce_ref(x, axis, keepdim, x.dtype(), [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s;
  });
}

Tensor max(const Tensor& x, int axis, bool keepdim) {
  return reduce_ref(x, axis, keepdim, x.dtype(), [](const std::vector<double>& v) {
    double m = -INFINITY;
    for (double e : v) m = std::max(m, e);
    return m;
  });
}

Tensor argmax(const Tensor& x, int axis, bool keepdim) {
  return reduce_ref(x, axis, keepdim, DType::i32, [](const std::vector<double>& v) {
    size_t best = 0;
    for (size_t k = 1; k < v.size(); ++k)
      if (v[k] > v[best]) best = k;
    return double(best);
  });
}

}  // namespace ref

}  // namespace rosetta
