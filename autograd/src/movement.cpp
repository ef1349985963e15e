// Movement ops: views of the input (no copy) whose gradients are the inverse view of the
// upstream gradient, or for slicing, the gradient written into zeros at the sliced place.
#include <numeric>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// For a view y = view_fn(x): view_fn(dx) += dy, the rest of dx unchanged (zero when fresh).
template <class ViewFn>
Var sliced_view(const Var& x, const char* name, ViewFn view_fn) {
  Var out(view_fn(x.data()));
  record(out, name, {&x}, [view_fn](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    if (d.beta == 0) d.out.zero_();
    Tensor part = view_fn(d.out);
    add_(part, dy);
    d.commit();
  });
  return out;
}
}  // namespace

// y = reshape(x)   =>  dx += reshape(dy, x.shape)
Var reshape(const Var& x, const Shape& shape) {
  Var out(x.data().reshape(shape));
  record(out, "reshape", {&x},
         [sx = x.shape()](const Tensor& dy, Node& n) { n.pass_view(0, dy.reshape(sx)); });
  return out;
}

Var transpose(const Var& x, int a, int b) {
  Var out(x.data().transpose(a, b));
  record(out, "transpose", {&x},
         [a, b](const Tensor& dy, Node& n) { n.pass_view(0, dy.transpose(a, b)); });
  return out;
}

// y = permute(x, order)   =>  dx += permute(dy, inverse(order))
Var permute(const Var& x, const std::vector<int>& order) {
  Var out(x.data().permute(order));
  std::vector<int> inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[normalize_axis(order[i], x.dim())] = int(i);
  record(out, "permute", {&x},
         [inv](const Tensor& dy, Node& n) { n.pass_view(0, dy.permute(inv)); });
  return out;
}

Var slice(const Var& x, int axis, int64_t start, int64_t stop, int64_t step) {
  return sliced_view(x, "slice",
                     [=](const Tensor& t) { return t.slice(axis, start, stop, step); });
}

Var narrow(const Var& x, int axis, int64_t start, int64_t length) {
  return sliced_view(x, "narrow", [=](const Tensor& t) { return t.narrow(axis, start, length); });
}

Var select(const Var& x, int axis, int64_t index) {
  return sliced_view(x, "select", [=](const Tensor& t) { return t.select(axis, index); });
}

// y = expand(x)   =>  dx += sum of dy over the broadcast axes
Var expand(const Var& x, const Shape& shape) {
  Var out(x.data().expand(shape));
  record(out, "expand", {&x}, [](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    expand_backward(dy, d);
    d.commit();
  });
  return out;
}

Var unsqueeze(const Var& x, int axis) {
  Shape s = x.shape();
  s.insert(normalize_axis(axis, x.dim() + 1), 1);
  return reshape(x, s);
}

Var squeeze(const Var& x, int axis) {
  axis = normalize_axis(axis, x.dim());
  ROSETTA_CHECK(x.shape()[axis] == 1, "squeeze: axis ", axis, " of shape ", x.shape(), " is not 1");
  Shape s = x.shape();
  s.erase(axis);
  return reshape(x, s);
}

Var contiguous(const Var& x) {
  if (x.data().is_contiguous()) return x;
  Var out(x.data().contiguous());
  record(out, "contiguous", {&x}, [](const Tensor& dy, Node& n) { n.pass_view(0, dy); });
  return out;
}

// y = cat(parts, axis)   =>  d(part_i) += dy[..., offset_i : offset_i + len_i, ...]
Var cat(const std::vector<Var>& parts, int axis) {
  ROSETTA_CHECK(!parts.empty(), "cat: no tensors");
  std::vector<Tensor> data;
  std::vector<int64_t> lengths;
  for (const Var& p : parts) {
    data.push_back(p.data());
    lengths.push_back(p.data().dim() > 0 ? p.size(axis) : 0);
  }
  Var out(rosetta::cat(data, axis));
  std::vector<const Var*> inputs;
  for (const Var& p : parts) inputs.push_back(&p);
  record(out, "cat", inputs, [axis, lengths](const Tensor& dy, Node& n) {
    int64_t at = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (n.needs(i)) n.pass_view(i, dy.narrow(axis, at, lengths[i]));
      at += lengths[i];
    }
  });
  return out;
}

}  // namespace rosetta
