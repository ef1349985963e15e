// The output layer fused with its cross-entropy (linear_cross_entropy_forward and _backward),
// for bf16 products. Its own file: added to softmax.cpp, it changed how GCC inlined and
// vectorised that file's fp32 softmax and cross-entropy loops, and with them fp32's bits.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backward.h"
#include "cross_entropy_args.h"
#include "kernels/bf16.h"
#include "rosetta/core/internal/fused.h"
#include "vecmath.h"

namespace rosetta {

namespace {
// Rows of logits per block of linear_cross_entropy_forward. Fewer keep a block in a nearer cache
// (128 x a vocabulary of 8,000 is 4 MB), more read the packed weight (V x K in bf16) fewer times:
// the small preset's output layer on one thread of a 2-core AMX Xeon, a step with 32 / 64 / 128 /
// 256 rows: 28.6 / 27.0 / 25.8 / 25.6 ms.
constexpr int64_t kLossRows = 128;

// One row of logits x (V of them, target t) in place of its loss's gradient per unit of g / count,
// softmax(x) - uniform - hit * onehot(t); returns its loss, as cross_entropy_forward takes it. One exponential
// per element (cross_entropy_backward takes a second), 512-bit vectors where the CPU has them
// (the reductions' order is this function's own: it matches no fp32 path).
ROSETTA_WIDE_VECTORS double ce_row_in_place(float* x, int64_t V, int32_t t, double smoothing, float uniform,
                                            float hit) {
  float m = -std::numeric_limits<float>::infinity(), sx = 0;
#pragma omp simd reduction(max : m) reduction(+ : sx)
  for (int64_t j = 0; j < V; ++j) {
    m = x[j] > m ? x[j] : m;
    sx += x[j];
  }
  const float xt = x[t];
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < V; ++j) {
    const float e = detail::vexp(x[j] - m);
    x[j] = e;
    s += e;
  }
  const float inv = 1.0f / s;
#pragma omp simd
  for (int64_t j = 0; j < V; ++j) x[j] = x[j] * inv - uniform;
  x[t] -= hit;
  const double l = double(m) + std::log(double(s));
  return (1.0 - smoothing) * (l - xt) + (smoothing > 0 ? smoothing * (l - double(sx) / double(V)) : 0.0);
}
}  // namespace

LinearCrossEntropyResult linear_cross_entropy_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                                      const Tensor& targets_in, double smoothing,
                                                      int32_t ignore_index) {
  ROSETTA_CHECK(linear_cross_entropy_fusable(x, w, bias), "linear_cross_entropy_forward: x ", x.shape(),
                ", w ", w.shape(), " and bias ", (bias.defined() ? bias.shape() : Shape{}),
                " are not contiguous F32 [N, K], [V, K] and [V] under bf16 products");
  const int64_t N = x.shape()[0], K = x.shape()[1], V = w.shape()[0];
  detail::check_ce_targets(N, targets_in, smoothing);
  const Tensor targets = targets_in.contiguous();
  const int32_t* pt = targets.data<int32_t>();
  const int64_t count = detail::count_ce_targets(pt, N, V, ignore_index);

  const int64_t blocks = (N + kLossRows - 1) / kLossRows;
  const int threads = int(std::min<int64_t>(detail::bf16_threads(N, V, K), blocks));
  // The logits' gradient, and x as the blocks' products round it (for the weight's gradient).
  Bf16Matrix grad = Bf16Matrix::empty(N, V), input = Bf16Matrix::empty(N, K);
  Tensor sums = bias.defined() ? Tensor::zeros({blocks, V}) : Tensor();  // per block, summed in order
  Tensor losses = Tensor::empty({blocks}, DType::f64);
  Tensor logits = Tensor::empty({threads, kLossRows, V});
  // x @ w^T reads w as op(B) of K x V, columns K apart: packed once per call, by the replicas'
  // shared packing where there is one, else into this thread's buffer (kept, as gemm_bf16 keeps
  // its packing buffers: V x K bf16 values).
  static thread_local detail::PackedB own;
  const detail::PackedB* packed = detail::shared_packing(w.data<float>(), K, K, V, true);
  if (!packed) {
    detail::pack_b_bf16(true, K, V, w.data<float>(), K, own);
    packed = &own;
  }
  const float *px = x.data<float>(), *pb = bias.defined() ? bias.data<float>() : nullptr;
  uint16_t *pg = grad.data(), *pin = input.data();
  const int64_t ldg = grad.ld(), ldin = input.ld();
  float* ps = sums.defined() ? sums.data<float>() : nullptr;
  double* pl = losses.data<double>();
  const float uniform = float(smoothing / double(V)), hit = float(1.0 - smoothing);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t r0 = blk * kLossRows, rows = std::min(kLossRows, N - r0);
    float* L = logits.data<float>() + int64_t(omp_get_thread_num()) * kLossRows * V;
    detail::gemm_bf16({.M = rows,
                       .N = V,
                       .K = K,
                       .a = {.f32 = px + r0 * K, .ld = K},
                       .b_packed = packed,
                       .a_out = {.rounded = pin + r0 * ldin, .ld_rounded = ldin},
                       .out = {.c = L, .ldc = V, .bias = pb}},
                      1);
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r0 + r;
      uint16_t* g = pg + i * ldg;
      if (pt[i] == ignore_index) {
        std::fill(g, g + V, uint16_t(0));
        continue;
      }
      float* row = L + r * V;
      total += ce_row_in_place(row, V, pt[i], smoothing, uniform, hit);
      detail::round_to_bf16(row, g, ps ? ps + blk * V : nullptr, V);
    }
    pl[blk] = total;
  }
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += pl[b];
  Tensor bias_grad;
  if (ps) {
    bias_grad = sums.narrow(0, 0, 1).reshape({V}).clone();
    float* out = bias_grad.data<float>();
    for (int64_t b = 1; b < blocks; ++b)
      for (int64_t j = 0; j < V; ++j) out[j] += ps[b * V + j];
  }
  return {Tensor::scalar(count > 0 ? total / double(count) : 0.0, DType::f32), grad, bias_grad, count, input};
}

void linear_cross_entropy_backward(const LinearCrossEntropyResult& r, const Tensor& w, double g, const GradOut& dx,
                                   const GradOut& dw, const GradOut& dbias) {
  ROSETTA_CHECK(r.grad.defined() && r.input.defined() && w.dim() == 2 && w.is_contiguous() &&
                    w.dtype() == DType::f32 && r.grad.cols == w.shape()[0] && r.input.cols == w.shape()[1] &&
                    r.grad.rows() == r.input.rows(),
                "linear_cross_entropy_backward: weight ", w.shape(), " is not the forward's");
  const int64_t N = r.input.rows(), K = r.input.cols, V = w.shape()[0];
  const float s = r.count > 0 ? float(g / double(r.count)) : 0.0f;
  const uint16_t *pg = r.grad.data(), *px = r.input.data();
  const int64_t ldg = r.grad.ld(), ldx = r.input.ld();
  // Into out's buffer where it is a dense row-major [rows, cols], else through a temporary.
  const auto product = [&](const GradOut& d, const Shape& shape, auto gemm) {
    if (!d.out.defined()) return;
    detail::check_grad_out(d, shape, DType::f32, "linear_cross_entropy_backward");
    if (d.out.is_contiguous()) {
      gemm(d.out.data<float>(), float(d.beta));
      d.out.bump_version();
      return;
    }
    Tensor fresh = Tensor::empty(shape);
    gemm(fresh.data<float>(), 0.0f);
    expand_backward(fresh, d);
  };
  // dx = s grad @ w: w as op(B) of V x K, rows K apart (the replicas' shared packing of dy @ w).
  product(dx, {N, K}, [&](float* c, float beta) {
    const detail::PackedB* packed = detail::shared_packing(w.data<float>(), K, V, K, false);
    detail::gemm_bf16({.M = N,
                       .N = K,
                       .K = V,
                       .a = {.bf16 = pg, .ld = ldg},
                       .b = {.f32 = packed ? nullptr : w.data<float>(), .ld = K},
                       .b_packed = packed,
                       .out = {.c = c, .ldc = K, .alpha = s, .beta = beta}},
                      detail::bf16_threads(N, K, V));
  });
  // dw = s grad^T @ x: grad's columns are op(A)'s rows, x as the forward rounded it.
  product(dw, {V, K}, [&](float* c, float beta) {
    detail::gemm_bf16({.M = V,
                       .N = K,
                       .K = N,
                       .a = {.trans = true, .bf16 = pg, .ld = ldg},
                       .b = {.bf16 = px, .ld = ldx},
                       .out = {.c = c, .ldc = K, .alpha = s, .beta = beta}},
                      detail::bf16_threads(V, K, N));
  });
  if (dbias.out.defined()) {
    ROSETTA_CHECK(r.bias_grad.defined(), "linear_cross_entropy_backward: the forward had no bias");
    Tensor scaled = r.bias_grad.clone();
    scale_(scaled, s);
    expand_backward(scaled, dbias);
  }
}

}  // namespace rosetta
