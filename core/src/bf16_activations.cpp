// Linear layers' inputs kept in bf16 for the backward pass (Bf16Matrix): rounded where the forward
// product packs them, or written in bf16 by relu_dropout_bf16, and read by the backward products
// without rounding again. Its own file, away from the fp32 kernels (see linear_cross_entropy.cpp).
#include <algorithm>
#include <cstring>

#include "backward.h"
#include "kernels/bf16.h"
#include "kernels/common.h"
#include "rosetta/core/internal/fused.h"
#include "strided.h"

namespace rosetta {

namespace {
// dy (a gradient of rows x columns) with unit column stride: as it is, or copied.
Tensor unit_columns(const Tensor& t) { return t.strides().back() == 1 && t.strides()[0] >= t.shape()[1] ? t : t.contiguous(); }

void check_matrix(const Bf16Matrix& m, const char* op) {
  ROSETTA_CHECK(m.defined() && m.words.dim() == 2 && m.words.dtype() == DType::i32 && m.words.is_contiguous() &&
                    m.words.shape()[1] == (m.cols + 1) / 2,
                op, ": not a Bf16Matrix");
}

void check_bias(const Tensor& bias, const Tensor& w, const char* op) {
  ROSETTA_CHECK(!bias.defined() || (bias.dtype() == DType::f32 && bias.shape() == Shape{w.shape()[0]} && bias.is_contiguous()),
                op, ": bias ", (bias.defined() ? bias.shape() : Shape{}), " does not match weight ", w.shape());
}

// g's M rows of A (a or a16, lda, and `rounded` where wanted) times w^T + bias, into g's output
// (c, or a relu and dropout epilogue): w [N, K] as op(B), from the replicas' shared packing
// where there is one.
void linear_gemm(detail::Bf16Gemm g, const Tensor& w, const Tensor& bias, const char* op) {
  check_bias(bias, w, op);
  g.N = w.shape()[0];
  g.K = w.shape()[1];
  const float* pw = w.data<float>();
  g.b_packed = detail::shared_packing(pw, g.K, g.K, g.N, true);
  g.b = {.trans = true, .f32 = g.b_packed ? nullptr : pw, .ld = g.K};
  g.out.bias = bias.defined() ? bias.data<float>() : nullptr;
  detail::gemm_bf16(g, detail::bf16_threads(g.M, g.N, g.K));
}

// y [M, N] = a @ w^T + bias, a fp32 (rows lda apart; rounded into `rounded` where given) or bf16.
Tensor linear_product(int64_t M, const float* a, const uint16_t* a16, int64_t lda, const Tensor& w,
                      const Tensor& bias, Bf16Matrix* rounded) {
  Tensor y = Tensor::empty({M, w.shape()[0]});
  linear_gemm({.M = M,
               .a = {.f32 = a, .bf16 = a16, .ld = lda},
               .a_out = {.rounded = rounded ? rounded->data() : nullptr, .ld_rounded = rounded ? rounded->ld() : 0},
               .out = {.c = y.data<float>(), .ldc = w.shape()[0]}},
              w, bias, "linear_bf16");
  return y;
}

// relu_dropout(x, p, seed, offset)'s parameters as relu_dropout_bf16 and the product epilogue
// take them (p 0: relu alone), for an output `out`.
detail::ReluDropout16 relu_dropout16(double p, uint64_t seed, uint64_t offset, Bf16Matrix& out) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  return {.out = out.data(), .ld = out.ld(), .key = detail::dropout_key(seed),
          .threshold = p > 0 ? uint32_t(detail::dropout_threshold(p)) : 0,
          .scale = p > 0 ? float(1.0 / (1.0 - p)) : 1.0f, .offset = offset};
}
}  // namespace

Bf16Matrix Bf16Matrix::empty(int64_t rows, int64_t cols) {
  Bf16Matrix m{Tensor::empty({rows, (cols + 1) / 2}, DType::i32), cols};
  if (cols % 2)
    for (int64_t i = 0; i < rows; ++i) m.data()[i * m.ld() + cols] = 0;
  return m;
}

Tensor Bf16Matrix::to_f32() const {
  check_matrix(*this, "Bf16Matrix::to_f32");
  const int64_t R = rows(), stride = ld();
  Tensor out = Tensor::empty({R, cols});
  const uint16_t* src = data();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint32_t bits = uint32_t(src[i * stride + j]) << 16;
      std::memcpy(dst + i * cols + j, &bits, sizeof bits);
    }
  return out;
}

Tensor linear_keeping_bf16(const Tensor& x, const Tensor& w, const Tensor& bias, Bf16Matrix& x16) {
  ROSETTA_CHECK(x.dim() == 2 && x.dtype() == DType::f32 && bf16_linear(x.shape()[0], w) &&
                    x.shape()[1] == w.shape()[1],
                "linear_keeping_bf16: x ", x.shape(), " and weight ", w.shape(), " are not [M, K] and [N, K] under bf16 products");
  const Tensor a = unit_columns(x);
  x16 = Bf16Matrix::empty(a.shape()[0], a.shape()[1]);
  return linear_product(a.shape()[0], a.data<float>(), nullptr, a.strides()[0], w, bias, &x16);
}

Tensor linear_bf16(const Bf16Matrix& a, const Tensor& w, const Tensor& bias) {
  check_matrix(a, "linear_bf16");
  ROSETTA_CHECK(bf16_linear(a.rows(), w) && a.cols == w.shape()[1], "linear_bf16: input [", a.rows(), ", ", a.cols,
                "] and weight ", w.shape(), " are not [M, K] and [N, K] under bf16 products");
  return linear_product(a.rows(), nullptr, a.data(), a.ld(), w, bias, nullptr);
}

bool linear_relu_dropout_fusable(const Tensor& x, const Tensor& w) {
  return x.dim() == 2 && x.dtype() == DType::f32 && bf16_linear(x.shape()[0], w) && x.shape()[1] == w.shape()[1] &&
         detail::gemm_bf16_one_block(x.shape()[1]);
}

Bf16Matrix linear_relu_dropout_bf16(const Tensor& x, const Tensor& w, const Tensor& bias, double p, uint64_t seed,
                                    uint64_t offset, Bf16Matrix& x16) {
  ROSETTA_CHECK(linear_relu_dropout_fusable(x, w), "linear_relu_dropout_bf16: x ", x.shape(), " and weight ",
                w.shape(), " are not [M, K] and [N, K] under bf16 products of one block of k");
  const int64_t M = x.shape()[0];
  Bf16Matrix out = Bf16Matrix::empty(M, w.shape()[0]);
  const detail::ReluDropout16 rd = relu_dropout16(p, seed, offset, out);
  const Tensor a = unit_columns(x);
  x16 = Bf16Matrix::empty(M, w.shape()[1]);
  linear_gemm({.M = M,
               .a = {.f32 = a.data<float>(), .ld = a.strides()[0]},
               .a_out = {.rounded = x16.data(), .ld_rounded = x16.ld()},
               .out = {.relu_dropout = &rd}},
              w, bias, "linear_relu_dropout_bf16");
  return out;
}

Bf16Matrix relu_dropout_bf16(const Tensor& x_in, double p, uint64_t seed, uint64_t offset) {
  ROSETTA_CHECK(x_in.dim() == 2 && x_in.dtype() == DType::f32, "relu_dropout_bf16: x ", x_in.shape(),
                " is not an F32 matrix");
  const Tensor x = x_in.contiguous();
  const int64_t R = x.shape()[0], C = x.shape()[1];
  Bf16Matrix out = Bf16Matrix::empty(R, C);
  const detail::ReluDropout16 rd = relu_dropout16(p, seed, offset, out);
  const float* px = x.data<float>();
  detail::parallel_rows(R, C, [&](int64_t b, int64_t e) {
    static thread_local detail::Scratch<float> row_buf;
    float* v = row_buf.get(size_t(C));
    for (int64_t i = b; i < e; ++i) {
      const float* xs = px + i * C;
      // As dropout_into<true> computes element n = i * C + j (the same counter, the same fp32
      // product), then rounded as the products round.
      detail::for_counter_runs(rd.key, offset + uint64_t(i * C), 0, C, [&](int64_t j0, uint32_t run, uint32_t lo0, uint32_t hi) {
        const float sc = rd.scale;  // in locals: the loop vectorises
        const uint32_t thr = rd.threshold;
#pragma omp simd
        for (uint32_t j = 0; j < run; ++j) {
          const uint32_t h = detail::fmix32((lo0 + j) * 0x9E3779B1u ^ hi);
          const float a = xs[j0 + j];
          v[j0 + j] = (a > 0.0f ? a : 0.0f) * (h >= thr ? sc : 0.0f);
        }
      });
      detail::round_to_bf16(v, rd.out + i * rd.ld, nullptr, C);
    }
  });
  return out;
}

void linear_param_grads(const Tensor& dy_in, const Bf16Matrix& x, const GradOut& dw, const GradOut& dbias) {
  check_matrix(x, "linear_param_grads");
  ROSETTA_CHECK(dy_in.dim() == 2 && dy_in.shape()[0] == x.rows(), "linear_param_grads: dy ", dy_in.shape(),
                " and x [", x.rows(), ", ", x.cols, "] are not [M, N] and [M, K]");
  const int64_t M = dy_in.shape()[1], N = x.cols, K = dy_in.shape()[0];  // of dw = dy^T x
  const bool direct = dw.out.defined() && dw.out.shape() == Shape{M, N} && dw.out.strides().back() == 1 &&
                      dy_in.dtype() == DType::f32 && dw.out.dtype() == DType::f32 && detail::bf16_gemm(M, N, K);
  if (!direct) return linear_param_grads(dy_in, x.to_f32(), dw, dbias);
  if (dbias.out.defined()) detail::check_grad_out(dbias, {M}, dy_in.dtype(), "linear_param_grads");
  const Tensor dy = unit_columns(dy_in);
  // The bias gradient is summed as dy is packed for the weight gradient, as the fp32 input's is.
  const Tensor sums = !dbias.out.defined() ? Tensor() : dbias.beta == 0 ? dbias.out : Tensor::empty({M});
  detail::gemm_bf16({.M = M,
                     .N = N,
                     .K = K,
                     .a = {.trans = true, .f32 = dy.data<float>(), .ld = dy.strides()[0]},
                     .b = {.bf16 = x.data(), .ld = x.ld()},
                     .a_out = {.row_sums = sums.defined() ? sums.data<float>() : nullptr},
                     .out = {.c = dw.out.data<float>(), .ldc = dw.out.strides()[0], .beta = float(dw.beta)}},
                    detail::bf16_threads(M, N, K));
  dw.out.bump_version();
  if (!dbias.out.defined()) return;
  if (dbias.beta != 0) return expand_backward(sums, dbias);  // no axes to sum: out = beta * out + sums
  dbias.out.bump_version();
}

void relu_linear_input_grad(const Tensor& dy_in, const Tensor& w, const Bf16Matrix& y, double scale,
                            const GradOut& dx) {
  if (!dx.out.defined()) return;
  check_matrix(y, "relu_linear_input_grad");
  ROSETTA_CHECK(dy_in.dim() == 2 && w.dim() == 2 && dy_in.shape()[1] == w.shape()[0] && y.rows() == dy_in.shape()[0] &&
                    y.cols == w.shape()[1],
                "relu_linear_input_grad: dy ", dy_in.shape(), ", weight ", w.shape(), " and y [", y.rows(), ", ",
                y.cols, "] are not [M, N], [N, K] and [M, K]");
  const int64_t M = dy_in.shape()[0], N = w.shape()[1], K = dy_in.shape()[1];  // of dx = dy w
  if (dx.beta != 0 || !bf16_linear(M, w) || dy_in.dtype() != DType::f32)
    return relu_linear_input_grad(dy_in, w, y.to_f32(), scale, dx);
  detail::check_grad_out(dx, {M, N}, DType::f32, "relu_linear_input_grad");
  const Tensor dy = unit_columns(dy_in);
  const float* pw = w.data<float>();
  const detail::PackedB* packed = detail::shared_packing(pw, N, K, N, false);
  detail::gemm_bf16({.M = M,
                     .N = N,
                     .K = K,
                     .a = {.f32 = dy.data<float>(), .ld = dy.strides()[0]},
                     .b = {.f32 = packed ? nullptr : pw, .ld = N},
                     .b_packed = packed,
                     .out = {.c = dx.out.data<float>(), .ldc = N, .alpha = float(scale), .gate16 = y.data(), .ldg = y.ld()}},
                    detail::bf16_threads(M, N, K));
  dx.out.bump_version();
}

}  // namespace rosetta
