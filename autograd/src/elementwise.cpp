// Elementwise ops. Broadcast inputs get their gradient summed back to their own shape (the
// core backward kernels do it: expand_backward, binary_backward, where_backward).
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// Input i's gradient += alpha * dy summed to its shape: dy itself when there is nothing to do.
void pass_sum(Node& n, size_t i, const Tensor& dy, double alpha = 1.0) {
  if (!n.needs(i)) return;
  if (alpha == 1.0 && dy.shape() == n.inputs[i]->shape) return n.pass_view(i, dy);
  GradDest d = n.grad_dest(i);
  expand_backward(dy, d, alpha);
  d.commit();
}

// The gradients of both operands of y = binary(op, a, b) (see core binary_backward).
void binary_grads(Node& n, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y,
                  const Tensor& dy) {
  for (int i = 0; i < 2; ++i) {
    GradDest d = n.grad_dest(size_t(i));
    binary_backward(op, i, a, b, y, dy, d);
    d.commit();
  }
}
}  // namespace

// y = a + b   =>  da += dy, db += dy
Var add(const Var& a, const Var& b) {
  Var out(rosetta::add(a.data(), b.data()));
  record(out, "add", {&a, &b}, [](const Tensor& dy, Node& n) {
    pass_sum(n, 0, dy);
    pass_sum(n, 1, dy);
  });
  return out;
}

// y = a - b   =>  da += dy, db -= dy
Var sub(const Var& a, const Var& b) {
  Var out(rosetta::sub(a.data(), b.data()));
  record(out, "sub", {&a, &b}, [](const Tensor& dy, Node& n) {
    pass_sum(n, 0, dy);
    pass_sum(n, 1, dy, -1.0);
  });
  return out;
}

// y = a * b   =>  da += dy * b, db += dy * a
Var mul(const Var& a, const Var& b) {
  Var out(rosetta::mul(a.data(), b.data()));
  record(out, "mul", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data())](const Tensor& dy, Node& n) {
           binary_grads(n, BinaryOp::mul, sa.get(), sb.get(), Tensor(), dy);
         });
  return out;
}

// y = a / b   =>  da += dy / b, db -= dy * y / b
Var div(const Var& a, const Var& b) {
  Var out(rosetta::div(a.data(), b.data()));
  record(out, "div", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data()), sy = Saved(out.data())](const Tensor& dy, Node& n) {
           binary_grads(n, BinaryOp::div, sa.get(), sb.get(), sy.get(), dy);
         });
  return out;
}

// y = a ^ b   =>  da += dy * b * a^(b-1), db += dy * y * log(a)
Var pow(const Var& a, const Var& b) {
  Var out(binary(BinaryOp::pow, a.data(), b.data()));
  record(out, "pow", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data()), sy = Saved(out.data())](const Tensor& dy, Node& n) {
           binary_grads(n, BinaryOp::pow, sa.get(), sb.get(), sy.get(), dy);
         });
  return out;
}

// y = x * s + c   =>  dx += dy * s
namespace {
Var affine_op(const Var& x, double s, double c, const char* name) {
  Var out(affine(x.data(), s, c));
  record(out, name, {&x}, [s](const Tensor& dy, Node& n) { pass_sum(n, 0, dy, s); });
  return out;
}
}  // namespace

Var neg(const Var& x) { return affine_op(x, -1, 0, "neg"); }
Var add_scalar(const Var& x, double s) { return affine_op(x, 1, s, "add_scalar"); }
Var mul_scalar(const Var& x, double s) { return affine_op(x, s, 0, "mul_scalar"); }

// y = x ^ p   =>  dx += dy * p * x^(p-1)   (pow's da with b = p)
Var pow_scalar(const Var& x, double p) {
  Var out(rosetta::pow_scalar(x.data(), p));
  record(out, "pow_scalar", {&x}, [sx = Saved(x.data()), p](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    binary_backward(BinaryOp::pow, 0, sx.get(), Tensor::scalar(p, dy.dtype()), Tensor(), dy, d);
    d.commit();
  });
  return out;
}

// y = f(x)   =>  dx += dy * f'(x), with f' from x or y (unary_backward).
namespace {
Var unary_op(const Var& x, UnaryOp op, const char* name, bool needs_x, bool needs_y) {
  Var out(unary(op, x.data()));
  record(out, name, {&x},
         [op, sx = needs_x ? Saved(x.data()) : Saved(),
          sy = needs_y ? Saved(out.data()) : Saved()](const Tensor& dy, Node& n) {
           const Tensor xs = sx.defined() ? sx.get() : Tensor();
           const Tensor ys = sy.defined() ? sy.get() : Tensor();
           GradDest d = n.grad_dest(0);
           unary_backward(op, xs, ys, dy, d);
           d.commit();
         });
  return out;
}
}  // namespace

Var exp(const Var& x) { return unary_op(x, UnaryOp::exp, "exp", false, true); }
Var log(const Var& x) { return unary_op(x, UnaryOp::log, "log", true, false); }
Var sqrt(const Var& x) { return unary_op(x, UnaryOp::sqrt, "sqrt", false, true); }
Var tanh(const Var& x) { return unary_op(x, UnaryOp::tanh, "tanh", false, true); }
Var sigmoid(const Var& x) { return unary_op(x, UnaryOp::sigmoid, "sigmoid", false, true); }
// Saves its output, not its input: y > 0 exactly where x > 0, and the next op (a linear layer)
// usually saves y anyway, so x can be freed.
Var relu(const Var& x) {
  Var out(unary(UnaryOp::relu, x.data()));
  record(out, "relu", {&x}, [sy = Saved(out.data())](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    unary_backward(UnaryOp::relu, sy.get(), Tensor(), dy, d);
    d.commit();
  });
  return out;
}
Var gelu(const Var& x) { return unary_op(x, UnaryOp::gelu, "gelu", true, false); }
Var square(const Var& x) { return unary_op(x, UnaryOp::square, "square", true, false); }

// y = cond ? a : b   =>  da += dy where cond, db += dy where !cond
Var where(const Tensor& cond, const Var& a, const Var& b) {
  Var out(rosetta::where(cond, a.data(), b.data()));
  record(out, "where", {&a, &b}, [cond](const Tensor& dy, Node& n) {
    for (int i = 0; i < 2; ++i) {
      GradDest d = n.grad_dest(size_t(i));
      where_backward(cond, /*taken=*/i == 0, dy, d);
      d.commit();
    }
  });
  return out;
}

// y = mask ? value : x   =>  dx += dy where !mask
Var masked_fill(const Var& x, const Tensor& mask, double value) {
  Var out(rosetta::masked_fill(x.data(), mask, value));
  record(out, "masked_fill", {&x}, [mask](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    where_backward(mask, /*taken=*/false, dy, d);
    d.commit();
  });
  return out;
}

}  // namespace rosetta
