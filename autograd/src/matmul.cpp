// Matrix products. Gradients are GEMMs with transposed views (BLAS flags, no copies); a
// gradient buffer is accumulated in place with beta = 1.
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// alpha * a @ b into a new tensor.
Tensor mm(const Tensor& a, const Tensor& b, double alpha) {
  if (alpha == 1.0) return matmul(a, b);
  Shape s = broadcast_shapes(Shape(a.shape()).resize_copy(a.dim() - 2), Shape(b.shape()).resize_copy(b.dim() - 2));
  s.push_back(a.shape().back(-2));
  s.push_back(b.shape().back(-1));
  Tensor out = Tensor::empty(s, a.dtype());
  matmul_into(out, a, b, alpha, 0.0);
  return out;
}

// dst (input i's gradient) += alpha * a @ b, written straight into its buffer when it has one.
void accumulate_matmul(Node& n, size_t i, const Tensor& a, const Tensor& b, double alpha = 1.0) {
  Tensor buf = n.grad_buffer(i);
  if (buf.defined() && buf.dim() == 2) matmul_into(buf, a, b, alpha, 1.0);
  else n.accumulate(i, mm(a, b, alpha));
}

Tensor rows(const Tensor& t) { return t.reshape({-1, t.shape().back()}); }
}  // namespace

// y = alpha a @ b   =>  da += alpha dy @ b^T, db += alpha a^T @ dy (summed over broadcast
// batch dims)
Var matmul(const Var& a, const Var& b, double alpha) {
  Var out(mm(a.data(), b.data(), alpha));
  record(out, "matmul", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data()), alpha](const Tensor& dy, Node& n) {
           const Tensor& A = sa.get();
           const Tensor& B = sb.get();
           if (n.needs(0)) {
             if (A.dim() == 2 && dy.dim() == 2) accumulate_matmul(n, 0, dy, B.transpose(-1, -2), alpha);
             else n.accumulate(0, sum_to(mm(dy, B.transpose(-1, -2), alpha), A.shape()));
           }
           if (n.needs(1)) {
             if (B.dim() == 2)  // fold the batch of a into rows: one GEMM
               accumulate_matmul(n, 1, rows(A).transpose(0, 1), rows(dy), alpha);
             else
               n.accumulate(1, sum_to(mm(A.transpose(-1, -2), dy, alpha), B.shape()));
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
