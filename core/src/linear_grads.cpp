// A linear layer's products beyond matmul: its parameters' gradients in one pass
// (linear_param_grads) and a relu's input gradient through it (relu_linear_input_grad), fused
// where the products are bf16; and where the bf16 fused ops of internal/fused.h serve.
#include "backward.h"
#include "matmul_routes.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/internal/fused.h"

namespace rosetta {

using detail::bf16_product;
using detail::bf16_threads;
using detail::layout_of;
using detail::MatLayout;

bool bf16_linear(int64_t rows, const Tensor& w) {
  return w.dim() == 2 && w.dtype() == DType::f32 && w.is_contiguous() &&
         detail::bf16_gemm(rows, w.shape()[0], w.shape()[1]);
}

bool linear_cross_entropy_fusable(const Tensor& x, const Tensor& w, const Tensor& bias) {
  if (x.dim() != 2 || w.dim() != 2 || x.shape()[1] != w.shape()[1] || !x.is_contiguous() || !w.is_contiguous())
    return false;
  if (bias.defined() && (bias.dtype() != DType::f32 || bias.shape() != Shape{w.shape()[0]} || !bias.is_contiguous()))
    return false;
  return detail::gemm_bf16_available() && bf16_product(x.shape()[0], w.shape()[0], x.shape()[1], {&x, &w});
}

void linear_param_grads(const Tensor& dy, const Tensor& x, const GradOut& dw, const GradOut& dbias) {
  ROSETTA_CHECK(dy.dim() == 2 && x.dim() == 2 && dy.shape()[0] == x.shape()[0], "linear_param_grads: dy ",
                dy.shape(), " and x ", x.shape(), " are not [M, N] and [M, K]");
  const int64_t M = dy.shape()[1], N = x.shape()[1], K = dy.shape()[0];  // of dw = dy^T x
  if (dbias.out.defined()) detail::check_grad_out(dbias, {M}, dy.dtype(), "linear_param_grads");
  if (dw.out.defined() && dbias.out.defined() && bf16_product(M, N, K, {&dw.out, &dy, &x}) &&
      dw.out.shape() == Shape{M, N}) {
    const Tensor dyt = dy.transpose(0, 1);
    const MatLayout la = layout_of(dyt), lb = layout_of(x), lc = layout_of(dw.out);
    if (la.ok && la.trans == CblasTrans && lb.ok && lc.ok && lc.trans == CblasNoTrans) {
      // The bias gradient is summed as dy is packed for the weight gradient: dy is read once.
      const Tensor sums = dbias.beta == 0 ? dbias.out : Tensor::empty({M}, DType::f32);
      detail::gemm_bf16(true, lb.trans == CblasTrans, M, N, K, 1.0f, dy.data<float>(), la.ld, x.data<float>(),
                        lb.ld, float(dw.beta), dw.out.data<float>(), lc.ld, bf16_threads(M, N, K), nullptr,
                        sums.data<float>());
      dw.out.bump_version();
      if (dbias.beta != 0) return expand_backward(sums, dbias);  // no axes to sum: out = beta * out + sums
      dbias.out.bump_version();
      return;
    }
  }
  if (dw.out.defined()) {
    Tensor out = dw.out;
    matmul_into(out, dy.transpose(0, 1), x, 1.0, dw.beta);
  }
  expand_backward(dy, dbias);
}

void relu_linear_input_grad(const Tensor& dy, const Tensor& w, const Tensor& y, double scale, const GradOut& dx) {
  if (!dx.out.defined()) return;
  ROSETTA_CHECK(dy.dim() == 2 && w.dim() == 2 && y.dim() == 2 && dy.shape()[1] == w.shape()[0] &&
                    y.shape() == Shape({dy.shape()[0], w.shape()[1]}),
                "relu_linear_input_grad: dy ", dy.shape(), ", weight ", w.shape(), " and y ", y.shape(),
                " are not [M, N], [N, K] and [M, K]");
  detail::check_grad_out(dx, y.shape(), dy.dtype(), "relu_linear_input_grad");
  const int64_t M = dy.shape()[0], N = w.shape()[1], K = dy.shape()[1];  // of dx = dy w
  if (dx.beta == 0 && bf16_product(M, N, K, {&dx.out, &dy, &w, &y}) && y.is_contiguous()) {
    const MatLayout la = layout_of(dy), lb = layout_of(w);
    if (la.ok && lb.ok) {
      detail::gemm_bf16_sharing(la.trans == CblasTrans, lb.trans == CblasTrans, M, N, K, float(scale), dy.data<float>(),
                                la.ld, w.data<float>(), lb.ld, 0.0f, dx.out.data<float>(), N, nullptr, y.data<float>(), N);
      dx.out.bump_version();
      return;
    }
  }
  unary_backward(UnaryOp::relu, y, Tensor(), matmul(dy, w), dx, scale);
}

}  // namespace rosetta
