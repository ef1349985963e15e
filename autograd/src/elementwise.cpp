// Elementwise ops. Broadcast inputs get their gradient summed back to their own shape (sum_to).
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
Tensor zeros_like_scalar(const Tensor& t) { return Tensor::zeros({}, t.dtype()); }
}  // namespace

// y = a + b   =>  da += dy, db += dy
Var add(const Var& a, const Var& b) {
  Var out(rosetta::add(a.data(), b.data()));
  record(out, "add", {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& dy, Node& n) {
    if (n.needs(0)) n.accumulate(0, sum_to(dy, sa));
    if (n.needs(1)) n.accumulate(1, sum_to(dy, sb));
  });
  return out;
}

// y = a - b   =>  da += dy, db -= dy
Var sub(const Var& a, const Var& b) {
  Var out(rosetta::sub(a.data(), b.data()));
  record(out, "sub", {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& dy, Node& n) {
    if (n.needs(0)) n.accumulate(0, sum_to(dy, sa));
    if (n.needs(1)) n.accumulate(1, sum_to(affine(dy, -1, 0), sb));
  });
  return out;
}

// y = a * b   =>  da += dy * b, db += dy * a
Var mul(const Var& a, const Var& b) {
  Var out(rosetta::mul(a.data(), b.data()));
  record(out, "mul", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data())](const Tensor& dy, Node& n) {
           if (n.needs(0)) n.accumulate(0, sum_to(rosetta::mul(dy, sb.get()), sa.get().shape()));
           if (n.needs(1)) n.accumulate(1, sum_to(rosetta::mul(dy, sa.get()), sb.get().shape()));
         });
  return out;
}

// y = a / b   =>  da += dy / b, db -= dy * y / b
Var div(const Var& a, const Var& b) {
  Var out(rosetta::div(a.data(), b.data()));
  record(out, "div", {&a, &b},
         [sa = a.shape(), sb = Saved(b.data()), sy = Saved(out.data())](const Tensor& dy, Node& n) {
           const Tensor q = rosetta::div(dy, sb.get());
           if (n.needs(0)) n.accumulate(0, sum_to(q, sa));
           if (n.needs(1))
             n.accumulate(1, sum_to(affine(rosetta::mul(q, sy.get()), -1, 0), sb.get().shape()));
         });
  return out;
}

// y = a ^ b   =>  da += dy * b * a^(b-1), db += dy * y * log(a)
Var pow(const Var& a, const Var& b) {
  Var out(binary(BinaryOp::pow, a.data(), b.data()));
  record(out, "pow", {&a, &b},
         [sa = Saved(a.data()), sb = Saved(b.data()), sy = Saved(out.data())](const Tensor& dy,
                                                                             Node& n) {
           const Tensor& A = sa.get();
           const Tensor& B = sb.get();
           if (n.needs(0)) {
             const Tensor d = rosetta::mul(B, binary(BinaryOp::pow, A, affine(B, 1, -1)));
             n.accumulate(0, sum_to(rosetta::mul(dy, d), A.shape()));
           }
           if (n.needs(1)) {
             const Tensor d = rosetta::mul(sy.get(), unary(UnaryOp::log, A));
             n.accumulate(1, sum_to(rosetta::mul(dy, d), B.shape()));
           }
         });
  return out;
}

// y = x * s + c   =>  dx += dy * s
namespace {
Var affine_op(const Var& x, double s, double c, const char* name) {
  Var out(affine(x.data(), s, c));
  record(out, name, {&x}, [s](const Tensor& dy, Node& n) {
    n.accumulate(0, s == 1.0 ? dy : affine(dy, s, 0));
  });
  return out;
}
}  // namespace

Var neg(const Var& x) { return affine_op(x, -1, 0, "neg"); }
Var add_scalar(const Var& x, double s) { return affine_op(x, 1, s, "add_scalar"); }
Var mul_scalar(const Var& x, double s) { return affine_op(x, s, 0, "mul_scalar"); }

// y = x ^ p   =>  dx += dy * p * x^(p-1)
Var pow_scalar(const Var& x, double p) {
  Var out(rosetta::pow_scalar(x.data(), p));
  record(out, "pow_scalar", {&x}, [sx = Saved(x.data()), p](const Tensor& dy, Node& n) {
    n.accumulate(0, rosetta::mul(dy, affine(rosetta::pow_scalar(sx.get(), p - 1), p, 0)));
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
           n.accumulate(0, unary_backward(op, xs, ys, dy));
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
    n.accumulate(0, unary_backward(UnaryOp::relu, sy.get(), Tensor(), dy));
  });
  return out;
}
Var gelu(const Var& x) { return unary_op(x, UnaryOp::gelu, "gelu", true, false); }
Var square(const Var& x) { return unary_op(x, UnaryOp::square, "square", true, false); }

// y = cond ? a : b   =>  da += dy where cond, db += dy where !cond
Var where(const Tensor& cond, const Var& a, const Var& b) {
  Var out(rosetta::where(cond, a.data(), b.data()));
  record(out, "where", {&a, &b},
         [cond, sa = a.shape(), sb = b.shape()](const Tensor& dy, Node& n) {
           const Tensor z = zeros_like_scalar(dy);
           if (n.needs(0)) n.accumulate(0, sum_to(rosetta::where(cond, dy, z), sa));
           if (n.needs(1)) n.accumulate(1, sum_to(rosetta::where(cond, z, dy), sb));
         });
  return out;
}

// y = mask ? value : x   =>  dx += dy where !mask
Var masked_fill(const Var& x, const Tensor& mask, double value) {
  Var out(rosetta::masked_fill(x.data(), mask, value));
  record(out, "masked_fill", {&x}, [mask](const Tensor& dy, Node& n) {
    n.accumulate(0, rosetta::masked_fill(dy, mask, 0.0));
  });
  return out;
}

}  // namespace rosetta
