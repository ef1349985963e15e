// Reductions. The gradient of a reduction is the upstream gradient broadcast back over the
// reduced axes (scaled by 1/n for mean; routed to the first maximum for max).
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

// y = sum(x)   =>  dx += dy (broadcast)
Var sum(const Var& x) {
  Var out(sum_all(x.data()));
  record(out, "sum", {&x}, [sx = x.shape()](const Tensor& dy, Node& n) {
    n.pass_view(0, dy.expand(sx));
  });
  return out;
}

Var sum(const Var& x, int axis, bool keepdim) {
  axis = normalize_axis(axis, x.dim());
  Var out(rosetta::sum(x.data(), axis, keepdim));
  record(out, "sum_axis", {&x}, [sx = x.shape(), axis, keepdim](const Tensor& dy, Node& n) {
    n.pass_view(0, (keepdim ? dy : dy.unsqueeze(axis)).expand(sx));
  });
  return out;
}

// y = sum(x) / n   =>  dx += dy / n
Var mean(const Var& x) { return mul_scalar(sum(x), 1.0 / double(std::max<int64_t>(x.numel(), 1))); }

Var mean(const Var& x, int axis, bool keepdim) {
  return mul_scalar(sum(x, axis, keepdim), 1.0 / double(x.size(axis)));
}

// y = max(x, axis)   =>  dx[argmax] += dy
Var max(const Var& x, int axis, bool keepdim) {
  axis = normalize_axis(axis, x.dim());
  Var out(rosetta::max(x.data(), axis, keepdim));
  record(out, "max", {&x},
         [idx = argmax(x.data(), axis, true), axis, keepdim](const Tensor& dy, Node& n) {
           GradDest d = n.grad_dest(0);
           max_backward(keepdim ? dy : dy.unsqueeze(axis), idx, axis, d);
           d.commit();
         });
  return out;
}

}  // namespace rosetta
