// Matrix products. Gradients are GEMMs with transposed views (BLAS flags, no copies); a
// gradient buffer is accumulated in place with beta = 1.
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// dst (input i's gradient) += a @ b, written straight into its buffer when it has one.
void accumulate_matmul(Node& n, size_t i, const Tensor& a, const Tensor& b) {
  Tensor buf = n.grad_buffer(i);
  if (buf.defined() && buf.dim() == 2) matmul_into(buf, a, b, 1.0, 1.0);
  else n.accumulate(i, matmul(a, b));
}

Tensor rows(const Tensor& t) { return t.reshape({-1, t.shape().back()}); }
}  // namespace

// y = a @ b   =>  da += dy @ b^T, db += a^T @ dy (summed over broadcast batch dims)
Var matmul(const Var& a, const Var& b) {
  Var out(rosetta::matmul(a.data(), b.data()));
  record(out, "matmul", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data())](const Tensor& dy, Node& n) {
           const Tensor& A = sa.get();
           const Tensor& B = sb.get();
           if (n.needs(0)) {
             if (A.dim() == 2 && dy.dim() == 2) accumulate_matmul(n, 0, dy, B.transpose(-1, -2));
             else n.accumulate(0, sum_to(rosetta::matmul(dy, B.transpose(-1, -2)), A.shape()));
           }
           if (n.needs(1)) {
             if (B.dim() == 2)  // fold the batch of a into rows: one GEMM
               accumulate_matmul(n, 1, rows(A).transpose(0, 1), rows(dy));
             else
               n.accumulate(1, sum_to(rosetta::matmul(A.transpose(-1, -2), dy), B.shape()));
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
