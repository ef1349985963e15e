// Matrix products. Gradients are GEMMs with transposed views (BLAS flags, no copies); a
// gradient buffer is accumulated in place with beta = 1.
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// alpha * a @ b into `out`, or into out's transpose when that is the row-major one.
void mm_into(Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  if (out.strides().back() == 1 || out.shape().back() == 1) return matmul_into(out, a, b, alpha, 0.0);
  Tensor t = out.transpose(-1, -2);  // (a b)^T = b^T a^T
  matmul_into(t, b.transpose(-1, -2), a.transpose(-1, -2), alpha, 0.0);
}

Shape product_shape(const Tensor& a, const Tensor& b) {
  Shape s = broadcast_shapes(Shape(a.shape()).resize_copy(a.dim() - 2), Shape(b.shape()).resize_copy(b.dim() - 2));
  s.push_back(a.shape().back(-2));
  s.push_back(b.shape().back(-1));
  return s;
}

// alpha * a @ b into a new tensor, its axes in memory in `order` ({}: row-major).
Tensor mm(const Tensor& a, const Tensor& b, double alpha, const std::vector<int>& order = {}) {
  if (alpha == 1.0 && order.empty()) return matmul(a, b);
  const Shape s = product_shape(a, b);
  Tensor out = order.empty() ? Tensor::empty(s, a.dtype()) : Tensor::empty_permuted(s, order, a.dtype());
  mm_into(out, a, b, alpha);
  return out;
}

// The gradient alpha * a @ b of `x`, an operand of shape x.shape(): laid out as x when x is a
// dense view whose matrices are row- or column-major (a permuted or transposed view: its own
// backward then turns the gradient back into a contiguous one without copying), summed over
// the batch dims x was broadcast along.
Tensor grad_like(const Tensor& x, const Tensor& a, const Tensor& b, double alpha) {
  if (product_shape(a, b) != x.shape()) return sum_to(mm(a, b, alpha), x.shape());
  Tensor out = Tensor::empty_like(x);
  if (out.strides().back() != 1 && out.strides().back(-2) != 1) out = Tensor::empty(x.shape(), x.dtype());
  mm_into(out, a, b, alpha);
  return out;
}

Tensor rows(const Tensor& t) { return t.reshape({-1, t.shape().back()}); }

// dst (input i's gradient) += alpha * a @ b, written straight into its buffer when it has one.
void accumulate_matmul(Node& n, size_t i, const Tensor& a, const Tensor& b, double alpha = 1.0) {
  Tensor buf = n.grad_buffer(i);
  if (buf.defined() && buf.dim() == 2) matmul_into(buf, a, b, alpha, 1.0);
  else n.accumulate(i, mm(a, b, alpha));
}
}  // namespace

// y = alpha a @ b   =>  da += alpha dy @ b^T, db += alpha a^T @ dy (summed over broadcast
// batch dims)
Var matmul(const Var& a, const Var& b, double alpha, const std::vector<int>& memory_order) {
  Var out(mm(a.data(), b.data(), alpha, memory_order));
  record(out, "matmul", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data()), alpha](const Tensor& dy, Node& n) {
           const Tensor& A = sa.get();
           const Tensor& B = sb.get();
           if (n.needs(0)) {
             if (A.dim() == 2 && dy.dim() == 2) accumulate_matmul(n, 0, dy, B.transpose(-1, -2), alpha);
             else n.accumulate(0, grad_like(A, dy, B.transpose(-1, -2), alpha));
           }
           if (n.needs(1)) {
             if (B.dim() == 2)  // fold the batch of a into rows: one GEMM
               accumulate_matmul(n, 1, rows(A).transpose(0, 1), rows(dy), alpha);
             else
               n.accumulate(1, grad_like(B, A.transpose(-1, -2), dy, alpha));
           }
         });
  return out;
}

// y = x @ W^T + bias   =>  dx += dy @ W, dW += dy^T @ x, dbias += sum_rows(dy)
Var linear(const Var& x, const Var& weight, const Var& bias) {
  const Tensor& W = weight.data();
  ROSETTA_CHECK(W.dim() == 2 && x.dim() >= 1 && x.shape().back() == W.shape()[1],
                "linear: input ", x.shape(), " does not match weight ", W.shape());
  const int64_t out_features = W.shape()[0];
  ROSETTA_CHECK(!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == out_features),
                "linear: bias ", (bias.defined() ? bias.shape() : Shape{}),
                " does not match weight ", W.shape());
  const Tensor x2 = rows(x.data());
  Tensor y = Tensor::empty({x2.shape()[0], out_features}, W.dtype());
  if (bias.defined()) y.copy_(bias.data());
  matmul_into(y, x2, W.transpose(0, 1), 1.0, bias.defined() ? 1.0 : 0.0);
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out_features;
  Var out(y.view(out_shape));
  record(out, "linear", {&x, &weight, &bias},
         [sx = Saved(x2), sw = Saved(W), sxs = x.shape()](const Tensor& dy_in, Node& n) {
           const Tensor dy = rows(dy_in);
           if (n.needs(0)) n.accumulate(0, rosetta::matmul(dy, sw.get()).view(sxs));
           if (n.needs(1)) accumulate_matmul(n, 1, dy.transpose(0, 1), sx.get());
           if (n.needs(2)) n.accumulate(2, rosetta::sum(dy, 0));
         });
  return out;
}

}  // namespace rosetta
