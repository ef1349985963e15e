// Elementwise kernels: unary maps, broadcasting binary ops, in-place accumulation, where,
// masked_fill, cat (dropout: dropout.cpp). Contiguous operands take a flat (vectorisable, OpenMP-split) loop; anything
// else goes through the strided iterator.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backward.h"
#include "rosetta/core/ops.h"
#include "strided.h"
#include "vecmath.h"

namespace rosetta {

namespace {

// gelu(x) = x Phi(x), gelu'(x) = Phi(x) + x phi(x)
template <class T>
inline T gelu(T x) {
  T cdf, pdf;
  detail::normal_cdf_pdf(x, cdf, pdf);
  return x * cdf;
}
template <class T>
inline T gelu_derivative(T x) {
  T cdf, pdf;
  detail::normal_cdf_pdf(x, cdf, pdf);
  return cdf + x * pdf;
}

template <UnaryOp Op, class T>
inline T unary_fn(T x) {
  if constexpr (Op == UnaryOp::neg) return -x;
  else if constexpr (Op == UnaryOp::exp) return std::exp(x);
  else if constexpr (Op == UnaryOp::log) return std::log(x);
  else if constexpr (Op == UnaryOp::sqrt) return std::sqrt(x);
  else if constexpr (Op == UnaryOp::tanh) return std::tanh(x);
  else if constexpr (Op == UnaryOp::sigmoid) return T(1) / (T(1) + std::exp(-x));
  else if constexpr (Op == UnaryOp::relu) return x > T(0) ? x : T(0);
  else if constexpr (Op == UnaryOp::gelu) return gelu(x);
  else if constexpr (Op == UnaryOp::abs) return std::abs(x);
  else if constexpr (Op == UnaryOp::square) return x * x;
  else return T(1) / x;  // reciprocal
}

// dx given x, y = f(x) and dy.
template <UnaryOp Op, class T>
inline T unary_grad(T x, T y, T dy) {
  if constexpr (Op == UnaryOp::neg) return -dy;
  else if constexpr (Op == UnaryOp::exp) return dy * y;
  else if constexpr (Op == UnaryOp::log) return dy / x;
  else if constexpr (Op == UnaryOp::sqrt) return dy * T(0.5) / y;
  else if constexpr (Op == UnaryOp::tanh) return dy * (T(1) - y * y);
  else if constexpr (Op == UnaryOp::sigmoid) return dy * y * (T(1) - y);
  else if constexpr (Op == UnaryOp::relu) return x > T(0) ? dy : T(0);
  else if constexpr (Op == UnaryOp::gelu) return dy * gelu_derivative(x);
  else if constexpr (Op == UnaryOp::abs) return x > T(0) ? dy : (x < T(0) ? -dy : T(0));
  else if constexpr (Op == UnaryOp::square) return dy * T(2) * x;
  else return -dy * y * y;  // reciprocal
}

template <BinaryOp Op, class T>
inline T binary_fn(T a, T b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  else if constexpr (Op == BinaryOp::sub) return a - b;
  else if constexpr (Op == BinaryOp::mul) return a * b;
  else if constexpr (Op == BinaryOp::div) return a / b;
  else if constexpr (Op == BinaryOp::pow) return std::pow(a, b);
  else if constexpr (Op == BinaryOp::maximum) return a > b ? a : b;
  else return a < b ? a : b;  // minimum
}

// The gradient of operand `which` of binary op Op from dy and the two operands u, v it needs
// (binary_operands names them).
template <BinaryOp Op, int Which, class T>
inline T binary_grad(T dy, T u, T v) {
  if constexpr (Op == BinaryOp::mul) return dy * u;                        // u = the other one
  else if constexpr (Op == BinaryOp::div && Which == 0) return dy / u;     // u = b
  else if constexpr (Op == BinaryOp::div) return -(dy / u * v);            // u = b, v = y
  else if constexpr (Which == 0) return dy * (v * std::pow(u, v - T(1)));  // pow: u = a, v = b
  else return dy * (u * std::log(v));                                      // pow: u = y, v = a
}

// Turns a runtime op into a compile-time one: fn(std::integral_constant<Enum, op>).
template <class Fn>
decltype(auto) with_unary(UnaryOp op, Fn&& fn) {
  using U = UnaryOp;
  switch (op) {
    case U::neg: return fn(std::integral_constant<U, U::neg>{});
    case U::exp: return fn(std::integral_constant<U, U::exp>{});
    case U::log: return fn(std::integral_constant<U, U::log>{});
    case U::sqrt: return fn(std::integral_constant<U, U::sqrt>{});
    case U::tanh: return fn(std::integral_constant<U, U::tanh>{});
    case U::sigmoid: return fn(std::integral_constant<U, U::sigmoid>{});
    case U::relu: return fn(std::integral_constant<U, U::relu>{});
    case U::gelu: return fn(std::integral_constant<U, U::gelu>{});
    case U::abs: return fn(std::integral_constant<U, U::abs>{});
    case U::square: return fn(std::integral_constant<U, U::square>{});
    case U::reciprocal: return fn(std::integral_constant<U, U::reciprocal>{});
  }
  ROSETTA_FAIL("unknown unary op");
}

template <class Fn>
decltype(auto) with_binary(BinaryOp op, Fn&& fn) {
  using B = BinaryOp;
  switch (op) {
    case B::add: return fn(std::integral_constant<B, B::add>{});
    case B::sub: return fn(std::integral_constant<B, B::sub>{});
    case B::mul: return fn(std::integral_constant<B, B::mul>{});
    case B::div: return fn(std::integral_constant<B, B::div>{});
    case B::pow: return fn(std::integral_constant<B, B::pow>{});
    case B::maximum: return fn(std::integral_constant<B, B::maximum>{});
    case B::minimum: return fn(std::integral_constant<B, B::minimum>{});
  }
  ROSETTA_FAIL("unknown binary op");
}

// out = f(x) elementwise, for any float dtype and layout.
template <class F>
Tensor map1(const Tensor& x, F&& f) {
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    T* po = out.data<T>();
    if (x.is_contiguous()) {
      const T* px = x.data<T>();
      detail::parallel_for(x.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) po[i] = f(px[i]);
      });
    } else {
      detail::for_each_strided2(x.shape(), po, out.strides(), x.data<T>(), x.strides(),
                                [&](T* o, const T* a) { *o = f(*a); });
    }
    return out;
  });
}

void check_same_float(const Tensor& a, const Tensor& b, const char* op) {
  ROSETTA_CHECK(a.defined() && b.defined(), op, ": undefined tensor");
  ROSETTA_CHECK(a.dtype() == b.dtype(), op, ": dtypes ", dtype_name(a.dtype()), " and ",
                dtype_name(b.dtype()), " differ");
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  return with_unary(op, [&](auto opc) {
    return dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return map1(x, [](T v) { return unary_fn<decltype(opc)::value, T>(v); });
    });
  });
}

void unary_backward(UnaryOp op, const Tensor& x_in, const Tensor& y_in, const Tensor& dy_in,
                    const GradOut& dx, double alpha) {
  if (!dx.out.defined()) return;
  const Tensor dy = dy_in.contiguous();
  // Ops whose derivative needs only one of x, y; the other may be undefined.
  const Tensor x = x_in.defined() ? x_in.contiguous() : dy;
  const Tensor y = y_in.defined() ? y_in.contiguous() : dy;
  ROSETTA_CHECK(x.shape() == dy.shape() && y.shape() == dy.shape(), "unary_backward: shapes ",
                x.shape(), ", ", y.shape(), ", ", dy.shape(), " differ");
  detail::check_grad_out(dx, dy.shape(), dy.dtype(), "unary_backward");
  with_unary(op, [&](auto opc) {
    dispatch_float(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *py = y.data<T>(), *pd = dy.data<T>();
      T* po = dx.out.data<T>();
      detail::with_beta(dx.beta, [&](auto acc) {
        detail::parallel_for(dy.numel(), [&](int64_t b, int64_t e) {
          // Locals, not captured references: read through the closures, the loop stays scalar.
          const T *x_ = px, *y_ = py, *dy_ = pd;
          const T al = T(alpha), be = T(dx.beta);
          T* dx_ = po;
#pragma omp simd
          for (int64_t i = b; i < e; ++i)
            detail::put<decltype(acc)::value>(dx_[i], be, unary_grad<decltype(opc)::value, T>(x_[i], y_[i], dy_[i]) * al);
        });
      });
    });
  });
  dx.out.bump_version();
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_same_float(a, b, "binary op");
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  return with_binary(op, [&](auto opc) {
    return dispatch_float(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr BinaryOp O = decltype(opc)::value;
      Tensor out = Tensor::empty(shape, a.dtype());
      T* po = out.data<T>();
      const int64_t n = out.numel();
      if (a.shape() == shape && b.shape() == shape && a.is_contiguous() && b.is_contiguous()) {
        const T *pa = a.data<T>(), *pb = b.data<T>();
        detail::parallel_for(n, [&](int64_t s, int64_t e) {
#pragma omp simd
          for (int64_t i = s; i < e; ++i) po[i] = binary_fn<O, T>(pa[i], pb[i]);
        });
      } else if (b.numel() == 1 && a.shape() == shape && a.is_contiguous()) {
        const T *pa = a.data<T>(), vb = *b.data<T>();
        detail::parallel_for(n, [&](int64_t s, int64_t e) {
#pragma omp simd
          for (int64_t i = s; i < e; ++i) po[i] = binary_fn<O, T>(pa[i], vb);
        });
      } else {
        const Tensor ea = a.expand(shape), eb = b.expand(shape);
        detail::for_each_strided3(shape, po, out.strides(), ea.data<T>(), ea.strides(),
                                  eb.data<T>(), eb.strides(),
                                  [](T* o, const T* x, const T* y) { *o = binary_fn<O, T>(*x, *y); });
      }
      return out;
    });
  });
}

void binary_backward(BinaryOp op, int which, const Tensor& a, const Tensor& b, const Tensor& y,
                     const Tensor& dy_in, const GradOut& dst) {
  ROSETTA_CHECK(op == BinaryOp::mul || op == BinaryOp::div || op == BinaryOp::pow,
                "binary_backward: only mul, div and pow have a backward here");
  ROSETTA_CHECK(which == 0 || which == 1, "binary_backward: operand ", which, " is not 0 or 1");
  if (!dst.out.defined()) return;
  check_same_float(a, b, "binary_backward");
  const Tensor dy = dy_in.contiguous();
  const Shape& full = dy.shape();
  detail::check_grad_out(dst, (which == 0 ? a : b).shape(), dy.dtype(), "binary_backward");
  // The two tensors binary_grad reads besides dy, broadcast to dy's shape.
  const bool needs_y = which == 1 && op != BinaryOp::mul;
  ROSETTA_CHECK(!needs_y || (y.defined() && y.shape() == full), "binary_backward: needs the output y of shape ",
                full);
  Tensor u, v;
  if (op == BinaryOp::mul) {
    u = v = which == 0 ? b : a;
  } else if (op == BinaryOp::div) {
    u = b;
    v = which == 0 ? b : y;
  } else {
    u = which == 0 ? a : y;
    v = which == 0 ? b : a;
  }
  u = u.expand(full);
  v = v.expand(full);
  detail::write_reduced(dst, full, [&](const GradOut& d) {
    with_binary(op, [&](auto opc) {
      dispatch_float(dy.dtype(), [&](auto tag) {
        using T = decltype(tag);
        constexpr BinaryOp O = decltype(opc)::value;
        const T be = T(d.beta);
        const T *pd = dy.data<T>(), *pu = u.data<T>(), *pv = v.data<T>();
        T* po = d.out.data<T>();
        auto run = [&](auto grad) {
          detail::with_beta(d.beta, [&](auto acc) {
            constexpr bool Acc = decltype(acc)::value;
            if (u.is_contiguous() && v.is_contiguous()) {
              detail::parallel_for(dy.numel(), [&](int64_t s, int64_t e) {
                const T *dy_ = pd, *u_ = pu, *v_ = pv;  // locals: see unary_backward
                const T be_ = be;
                T* out = po;
#pragma omp simd
                for (int64_t i = s; i < e; ++i) detail::put<Acc>(out[i], be_, grad(dy_[i], u_[i], v_[i]));
              });
            } else {
              detail::for_each_strided4(full, po, d.out.strides(), pd, dy.strides(), pu, u.strides(),
                                        pv, v.strides(), [&](T* o, const T* g, const T* x, const T* z) {
                                          detail::put<Acc>(*o, be, grad(*g, *x, *z));
                                        });
            }
          });
        };
        if (which == 0) run([](T g, T x, T z) { return binary_grad<O, 0, T>(g, x, z); });
        else run([](T g, T x, T z) { return binary_grad<O, 1, T>(g, x, z); });
      });
    });
    d.out.bump_version();
  });
}

void where_backward(const Tensor& cond, bool taken, const Tensor& dy_in, const GradOut& dst) {
  if (!dst.out.defined()) return;
  ROSETTA_CHECK(cond.dtype() == DType::i32, "where_backward: condition must be I32, got ",
                dtype_name(cond.dtype()));
  const Tensor dy = dy_in.contiguous();
  const Tensor c = cond.expand(dy.shape());
  detail::write_reduced(dst, dy.shape(), [&](const GradOut& d) {
    detail::check_grad_out(d, dy.shape(), dy.dtype(), "where_backward");
    dispatch_float(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T be = T(d.beta);
      detail::with_beta(d.beta, [&](auto acc) {
        detail::for_each_strided3(dy.shape(), d.out.data<T>(), d.out.strides(), c.data<int32_t>(),
                                  c.strides(), dy.data<T>(), dy.strides(),
                                  [&](T* o, const int32_t* m, const T* g) {
                                    detail::put<decltype(acc)::value>(*o, be, (*m != 0) == taken ? *g : T(0));
                                  });
      });
    });
    d.out.bump_version();
  });
}

Tensor affine(const Tensor& x, double scale, double shift) {
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T s = T(scale), h = T(shift);
    return map1(x, [s, h](T v) { return v * s + h; });
  });
}

Tensor pow_scalar(const Tensor& x, double p) {
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T e = T(p);
    if (p == 2.0) return map1(x, [](T v) { return v * v; });
    return map1(x, [e](T v) { return std::pow(v, e); });
  });
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_same_float(dst, src, "add_");
  const Tensor s = src.expand(dst.shape());
  dispatch_float(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T al = T(alpha);
    T* pd = dst.data<T>();
    if (dst.is_contiguous() && s.is_contiguous()) {
      const T* ps = s.data<T>();
      detail::parallel_for(dst.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) pd[i] += al * ps[i];
      });
    } else {
      detail::for_each_strided2(dst.shape(), pd, dst.strides(), s.data<T>(), s.strides(),
                                [al](T* d, const T* x) { *d += al * *x; });
    }
  });
  dst.bump_version();
}

void scale_(Tensor& dst, double s) {
  dispatch_float(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T k = T(s);
    T* pd = dst.data<T>();
    if (dst.is_contiguous()) {
      detail::parallel_for(dst.numel(), [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) pd[i] *= k;
      });
    } else {
      detail::for_each_strided1(dst.shape(), pd, dst.strides(), [k](T* d) { *d *= k; });
    }
  });
  dst.bump_version();
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_float(a, b, "where");
  ROSETTA_CHECK(cond.dtype() == DType::i32, "where: condition must be I32, got ",
                dtype_name(cond.dtype()));
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape()), b.shape());
  const Tensor c = cond.expand(shape), ea = a.expand(shape), eb = b.expand(shape);
  return dispatch_float(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(shape, a.dtype());
    // Two passes keep to the 3-operand iterator: out = b, then out = a where cond.
    out.copy_(eb);
    detail::for_each_strided3(shape, out.data<T>(), out.strides(), c.data<int32_t>(),
                              c.strides(), ea.data<T>(), ea.strides(),
                              [](T* o, const int32_t* m, const T* x) {
                                if (*m) *o = *x;
                              });
    return out;
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ROSETTA_CHECK(mask.dtype() == DType::i32, "masked_fill: mask must be I32, got ",
                dtype_name(mask.dtype()));
  const Tensor m = mask.expand(x.shape());
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = T(value);
    Tensor out = x.clone();
    detail::for_each_strided2(x.shape(), out.data<T>(), out.strides(), m.data<int32_t>(),
                              m.strides(), [v](T* o, const int32_t* k) {
                                if (*k) *o = v;
                              });
    return out;
  });
}

Tensor cat(const std::vector<Tensor>& parts, int axis) {
  ROSETTA_CHECK(!parts.empty(), "cat: no tensors");
  const Tensor& first = parts[0];
  axis = normalize_axis(axis, first.dim());
  Shape shape = first.shape();
  int64_t total = 0;
  for (const Tensor& p : parts) {
    ROSETTA_CHECK(p.dtype() == first.dtype() && p.dim() == first.dim(), "cat: tensor ", p.shape(),
                  " ", dtype_name(p.dtype()), " does not match ", first.shape(), " ",
                  dtype_name(first.dtype()));
    for (int d = 0; d < first.dim(); ++d)
      ROSETTA_CHECK(d == axis || p.shape()[d] == first.shape()[d], "cat: shapes ", first.shape(),
                    " and ", p.shape(), " differ outside axis ", axis);
    total += p.shape()[axis];
  }
  shape[axis] = total;
  Tensor out = Tensor::empty(shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& p : parts) {
    out.narrow(axis, at, p.shape()[axis]).copy_(p);
    at += p.shape()[axis];
  }
  return out;
}

// ------------------------------------------------------------------ naive references

namespace ref {

using detail::bcast_index;
using detail::for_each_index;

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::f64);
  double* po = out.data<double>();
  int64_t i = 0;
  for_each_index(x.shape(), [&](const std::vector<int64_t>& idx) {
    po[i++] = with_unary(op, [&](auto opc) {
      return unary_fn<decltype(opc)::value, double>(x.at(idx));
    });
  });
  return out.to(x.dtype());
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, DType::f64);
  double* po = out.data<double>();
  int64_t i = 0;
  for_each_index(shape, [&](const std::vector<int64_t>& idx) {
    const double va = a.at(bcast_index(idx, a.shape())), vb = b.at(bcast_index(idx, b.shape()));
    po[i++] = with_binary(op, [&](auto opc) { return binary_fn<decltype(opc)::value, double>(va, vb); });
  });
  return out.to(a.dtype());
}

}  // namespace ref

}  // namespace rosetta
