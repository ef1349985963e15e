// Matrix products. Gradients are GEMMs with transposed views (BLAS flags, no copies), written
// straight into their destination (GEMM's beta: 1 adds to a gradient buffer or the gradient so
// far, 0 fills a fresh one).
#include <memory>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/internal/fused.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// out = alpha * a @ b + beta * out, or the same into out's transpose when that is the
// row-major one.
void mm_into(const Tensor& out_in, const Tensor& a, const Tensor& b, double alpha, double beta) {
  Tensor out = out_in;
  if (out.strides().back() == 1 || out.shape().back() == 1) return matmul_into(out, a, b, alpha, beta);
  Tensor t = out.transpose(-1, -2);  // (a b)^T = b^T a^T
  matmul_into(t, b.transpose(-1, -2), a.transpose(-1, -2), alpha, beta);
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
  mm_into(out, a, b, alpha, 0.0);
  return out;
}

Tensor rows(const Tensor& t) { return t.reshape({-1, t.shape().back()}); }

// Input i's gradient += alpha * a @ b, for the operand x. A fresh gradient is laid out as x when
// x is a dense view whose matrices are row- or column-major (a permuted or transposed view: its
// own backward then turns the gradient back into a contiguous one without copying). An operand
// broadcast over batch dims gets the product summed over them.
void grad_matmul(Node& n, size_t i, const Tensor& x, const Tensor& a, const Tensor& b, double alpha) {
  if (!n.needs(i)) return;
  const bool broadcast = product_shape(a, b) != x.shape();
  const bool writable_layout = x.strides().back() == 1 || x.strides().back(-2) == 1;
  GradDest d = n.grad_dest(i, !broadcast && writable_layout ? x : Tensor());
  if (broadcast) expand_backward(mm(a, b, alpha), d);
  else mm_into(d.out, a, b, alpha, d.beta);
  d.commit();
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
           grad_matmul(n, 0, A, dy, B.transpose(-1, -2), alpha);
           if (B.dim() == 2)  // fold the batch of a into rows: one GEMM
             grad_matmul(n, 1, B, rows(A).transpose(0, 1), rows(dy), alpha);
           else
             grad_matmul(n, 1, B, A.transpose(-1, -2), dy, alpha);
         });
  return out;
}

namespace {
void check_linear(const Shape& x, const Var& weight, const Var& bias, const char* op) {
  const Tensor& W = weight.data();
  ROSETTA_CHECK(W.dim() == 2 && x.size() >= 1 && x.back() == W.shape()[1], op, ": input ", x,
                " does not match weight ", W.shape());
  ROSETTA_CHECK(!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == W.shape()[0]), op, ": bias ",
                (bias.defined() ? bias.shape() : Shape{}), " does not match weight ", W.shape());
}

// The rows y [rows, out_features] of a linear layer with weight W, shaped as its input x_shape
// with the last axis out_features.
Tensor shaped_as_input(const Tensor& y, const Shape& x_shape, const Tensor& W) {
  Shape out_shape = x_shape;
  out_shape[out_shape.size() - 1] = W.shape()[0];
  return y.view(out_shape);
}

// x2 [rows, in] @ W^T + bias, shaped as x_shape with its last axis out_features.
Tensor linear_forward(const Tensor& x2, const Shape& x_shape, const Tensor& W, const Var& bias) {
  Tensor y = Tensor::empty({x2.shape()[0], W.shape()[0]}, W.dtype());
  matmul_bias_into(y, x2, W.transpose(0, 1), bias.defined() ? bias.data() : Tensor());
  return shaped_as_input(y, x_shape, W);
}

Tensor as_f32(const Tensor& x) { return x; }
Tensor as_f32(const Bf16Matrix& x) { return x.to_f32(); }

// dW += dy^T @ x2 and dbias += sum_rows(dy), into the node's inputs 1 and 2; x2 fp32 or kept in
// bf16 (Bf16Matrix).
template <class X>
void linear_weight_grads(Node& n, const Tensor& dy, const X& x2, size_t w = 1, size_t b = 2) {
  GradDest dw = n.grad_dest(w), db = n.grad_dest(b);
  if (!dw.out.defined() || dw.out.strides().back() == 1) {
    linear_param_grads(dy, x2, dw, db);
  } else {
    mm_into(dw.out, dy.transpose(0, 1), as_f32(x2), 1.0, dw.beta);
    expand_backward(dy, db);
  }
  dw.commit();
  db.commit();
}

// Where the weight's gradient is wanted and the products are bf16, the input is kept in bf16 as
// the forward product rounds it (Bf16Matrix; the backward product would round it the same way):
// half the bytes to hold, and read cold by the backward pass. Self-attention's three projections
// read one input: the last input kept on this thread is reused for the same tensor, so it is
// rounded and held once.
struct KeptInput {
  uint64_t storage = 0, version = 0;
  int64_t offset = 0;
  Shape shape, strides;
  Bf16Matrix matrix;
  bool same(const Tensor& t) const {
    return matrix.defined() && t.storage_id() == storage && t.version() == version && t.offset() == offset &&
           t.shape() == shape && t.strides() == strides;
  }
};
thread_local KeptInput t_kept_input;

bool keeps_bf16(const Tensor& x2, const Var& weight) {
  return grad_enabled() && weight.requires_grad() && x2.dtype() == DType::f32 && x2.strides().back() == 1 &&
         bf16_linear(x2.shape()[0], weight.data());
}

// x2 @ W^T + bias, x2 kept in bf16 into x16.
Tensor linear_forward_keeping(const Tensor& x2, const Tensor& W, const Var& bias, Bf16Matrix& x16) {
  const Tensor b = bias.defined() ? bias.data() : Tensor();
  KeptInput& memo = t_kept_input;
  if (memo.same(x2)) {
    x16 = memo.matrix;
    return linear_bf16(x16, W, b);
  }
  Tensor y = linear_keeping_bf16(x2, W, b, x16);
  memo = {x2.storage_id(), x2.version(), x2.offset(), x2.shape(), x2.strides(), x16};
  return y;
}

// The backward of linear and relu_dropout_linear (their input's gradient aside): gradients of the
// weight and bias from the input `in` as kept (a Saved fp32 tensor or a Bf16Matrix).
const Tensor& kept(const Saved& s) { return s.get(); }
const Bf16Matrix& kept(const Bf16Matrix& m) { return m; }

template <class In>
void record_linear(Var& out, const Var& x, const Var& weight, const Var& bias, In in) {
  record(out, "linear", {&x, &weight, &bias}, [in = std::move(in), sw = Saved(weight.data())](const Tensor& dy_in, Node& n) {
    const Tensor dy = rows(dy_in);
    GradDest dx = n.grad_dest(0);
    if (dx.out.defined()) mm_into(rows(dx.out), dy, sw.get(), 1.0, dx.beta);
    linear_weight_grads(n, dy, kept(in));
    dx.commit();
  });
}
}  // namespace

// y = x @ W^T + bias   =>  dx += dy @ W, dW += dy^T @ x, dbias += sum_rows(dy)
Var linear(const Var& x, const Var& weight, const Var& bias) {
  check_linear(x.shape(), weight, bias, "linear");
  const Tensor x2 = rows(x.data());
  if (keeps_bf16(x2, weight)) {
    Bf16Matrix x16;
    Var out(shaped_as_input(linear_forward_keeping(x2, weight.data(), bias, x16), x.shape(), weight.data()));
    record_linear(out, x, weight, bias, std::move(x16));
    return out;
  }
  Var out(linear_forward(x2, x.shape(), weight.data(), bias));
  record_linear(out, x, weight, bias, Saved(x2));
  return out;
}

// a = relu_dropout(h) (relu(h) when not training or p is 0), y = a @ W^T + bias   =>
// dh += (dy @ W) / (1 - p) where a > 0, dW += dy^T @ a, dbias += sum_rows(dy)
Var relu_dropout_linear(const Var& h, double p, Generator& gen, bool training, const Var& weight, const Var& bias) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  check_linear(h.shape(), weight, bias, "relu_dropout_linear");
  const bool drop = training && p > 0.0;
  // 1 / (1 - p): the factor dropout applies, rounded as it rounds it.
  const double scale = drop ? 1.0 / (1.0 - p) : 1.0;
  const auto record_op = [&](Var& out, auto a) {
    record(out, "relu_dropout_linear", {&h, &weight, &bias},
           [a = std::move(a), sw = Saved(weight.data()), scale](const Tensor& dy_in, Node& n) {
             const Tensor dy = rows(dy_in);
             GradDest dh = n.grad_dest(0);
             if (dh.out.defined()) relu_linear_input_grad(dy, sw.get(), kept(a), scale, {rows(dh.out), dh.beta});
             linear_weight_grads(n, dy, kept(a));
             dh.commit();
           });
  };
  const uint64_t seed = drop ? gen.seed() : 0, offset = drop ? gen.reserve(uint64_t(h.numel())) : 0;
  const Tensor h2 = rows(h.data());
  if (keeps_bf16(h2, weight)) {
    // The activation is written in bf16 only: its fp32 values are never needed.
    Bf16Matrix a = relu_dropout_bf16(h2, drop ? p : 0.0, seed, offset);
    Var out(shaped_as_input(linear_bf16(a, weight.data(), bias.defined() ? bias.data() : Tensor()), h.shape(),
                            weight.data()));
    record_op(out, std::move(a));
    return out;
  }
  const Tensor a = drop ? relu_dropout(h.data(), p, seed, offset) : unary(UnaryOp::relu, h.data());
  const Tensor a2 = rows(a);
  Var out(linear_forward(a2, h.shape(), weight.data(), bias));
  record_op(out, Saved(a2));
  return out;
}

Var linear_relu_dropout_linear(const Var& x, const Var& w1, const Var& b1, double p, Generator& gen, bool training,
                               const Var& w2, const Var& b2) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  check_linear(x.shape(), w1, b1, "linear_relu_dropout_linear");
  Shape hidden = x.shape();
  hidden[hidden.size() - 1] = w1.shape()[0];
  check_linear(hidden, w2, b2, "linear_relu_dropout_linear");
  const Tensor x2 = rows(x.data());
  const int64_t R = x2.shape()[0], F = w1.shape()[0];
  // Where the two ops would keep their inputs in bf16 (so their products are the fused ones').
  if (!keeps_bf16(x2, w1) || !linear_relu_dropout_fusable(x2, w1.data()) || !w2.requires_grad() ||
      !bf16_linear(R, w2.data()))
    return relu_dropout_linear(linear(x, w1, b1), p, gen, training, w2, b2);
  const bool drop = training && p > 0.0;
  const double scale = drop ? 1.0 / (1.0 - p) : 1.0;  // as relu_dropout_linear rounds it
  const uint64_t seed = drop ? gen.seed() : 0, offset = drop ? gen.reserve(uint64_t(R * F)) : 0;
  Bf16Matrix x16;
  Bf16Matrix a = linear_relu_dropout_bf16(x2, w1.data(), b1.defined() ? b1.data() : Tensor(), drop ? p : 0.0, seed,
                                          offset, x16);
  Var out(shaped_as_input(linear_bf16(a, w2.data(), b2.defined() ? b2.data() : Tensor()), hidden, w2.data()));
  record(out, "linear_relu_dropout_linear", {&x, &w1, &b1, &w2, &b2},
         [x16 = std::move(x16), a = std::move(a), sw1 = Saved(w1.data()), sw2 = Saved(w2.data()), scale, R,
          F](const Tensor& dy_in, Node& n) {
           const Tensor dy = rows(dy_in);
           // The second layer as relu_dropout_linear's backward, then the first as linear's.
           Tensor dh;
           if (n.needs(0) || n.needs(1) || n.needs(2)) {
             dh = Tensor::empty({R, F});
             relu_linear_input_grad(dy, sw2.get(), a, scale, {dh, 0.0});
           }
           linear_weight_grads(n, dy, a, 3, 4);
           if (!dh.defined()) return;
           GradDest dx = n.grad_dest(0);
           if (dx.out.defined()) mm_into(rows(dx.out), dh, sw1.get(), 1.0, dx.beta);
           linear_weight_grads(n, dh, x16, 1, 2);
           dx.commit();
         });
  return out;
}

// loss = cross_entropy(linear(x, weight, bias), targets, label_smoothing, ignore_index), in one op
// where the products are bf16 (linear_cross_entropy_forward: the logits never whole, their
// gradient kept in bf16); the two ops otherwise.
Var linear_cross_entropy(const Var& x, const Var& weight, const Var& bias, const Tensor& targets,
                         double label_smoothing, int32_t ignore_index) {
  check_linear(x.shape(), weight, bias, "linear_cross_entropy");
  Shape rows_shape = x.shape();
  rows_shape.resize(rows_shape.size() - 1);
  ROSETTA_CHECK(targets.shape() == rows_shape, "linear_cross_entropy: targets ", targets.shape(),
                " do not match input ", x.shape());
  const Tensor x2 = rows(x.data()), b = bias.defined() ? bias.data() : Tensor();
  if (!grad_enabled() || !linear_cross_entropy_fusable(x2, weight.data(), b))
    return cross_entropy(linear(x, weight, bias), targets, label_smoothing, ignore_index);
  auto r = std::make_shared<const LinearCrossEntropyResult>(
      linear_cross_entropy_forward(x2, weight.data(), b, targets.reshape({-1}), label_smoothing, ignore_index));
  Var out(r->loss);
  record(out, "linear_cross_entropy", {&x, &weight, &bias},
         [r, sw = Saved(weight.data())](const Tensor& dy, Node& n) {
           GradDest dx = n.grad_dest(0), dw = n.grad_dest(1), db = n.grad_dest(2);
           linear_cross_entropy_backward(*r, sw.get(), dy.item(),
                                         {dx.out.defined() ? rows(dx.out) : Tensor(), dx.beta}, {dw.out, dw.beta},
                                         {db.out, db.beta});
           dx.commit();
           dw.commit();
           db.commit();
         });
  return out;
}

}  // namespace rosetta
