// Var: a tensor that takes part in reverse-mode differentiation.
//
// A Var holds its value (a core Tensor), its accumulated gradient, and, when it was produced by
// an op on inputs that require a gradient, the graph Node that produced it. Nodes own their
// inputs; an output owns its node; nothing points back, so the graph has no cycles and is freed
// as soon as the last Var using it goes away.
//
//   Generator gen(0);
//   Var w(gen.normal({4, 3}), /*requires_grad=*/true);
//   Var loss = mean(square(matmul(x, w)));
//   loss.backward();          // w.grad() now holds dloss/dw (accumulated with +=)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rosetta/core/lifetime.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/tensor.h"

namespace rosetta {

struct Node;

// What the graph keeps of a value: its gradient and the node that produced it, never the value
// itself. A node refers to its inputs through this, so an activation that no backward needs is
// freed as soon as the last Var holding it goes away, even while its graph lives on.
struct AutogradMeta {
  Tensor grad;                    // undefined until the first gradient arrives
  std::shared_ptr<Node> grad_fn;  // null for leaves
  bool requires_grad = false;
  // The gradient is a preallocated buffer (e.g. a view into an optimizer's flat gradient
  // storage): it is always accumulated in place and zeroed, never replaced or dropped.
  bool grad_is_buffer = false;
  // A buffer counted as zero whatever it holds (Var::zero_grad_lazily): the next gradient to
  // arrive is written over it instead of added to it.
  bool grad_is_stale = false;
  Shape shape;  // of the value, to check gradients against
  DType dtype = DType::f32;
};

struct VarImpl {
  Tensor data;
  std::shared_ptr<AutogradMeta> meta;  // never null
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const ROSETTA_LIFETIMEBOUND { return impl_->data; }
  // Copies a new value in place (e.g. to load weights); shape and dtype must match. Views of
  // the value (e.g. a flat optimizer buffer) stay valid, and the version bump lets stale
  // graphs detect the change.
  void set_data(const Tensor& t);
  // The gradient (undefined before any arrived); a stale buffer (zero_grad_lazily) gets its
  // zeros first.
  const Tensor& grad() const ROSETTA_LIFETIMEBOUND;
  bool requires_grad() const { return impl_ && impl_->meta->requires_grad; }
  Var& set_requires_grad(bool on);
  bool is_leaf() const { return !impl_->meta->grad_fn; }

  const Shape& shape() const ROSETTA_LIFETIMEBOUND { return impl_->data.shape(); }
  int dim() const { return impl_->data.dim(); }
  int64_t size(int axis) const { return impl_->data.size(axis); }
  int64_t numel() const { return impl_->data.numel(); }
  DType dtype() const { return impl_->data.dtype(); }
  double item() const { return impl_->data.item(); }

  // Reverse-mode sweep from this Var. A scalar is seeded with 1; otherwise pass the upstream
  // gradient. The graph's saved tensors are released afterwards unless retain_graph is set;
  // a second backward through a released graph throws.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& grad_output, bool retain_graph = false) const;

  // Zeroes the gradient buffer, or drops the gradient when it is not a buffer.
  void zero_grad() const;
  // zero_grad without the pass over the buffer: a gradient buffer is only counted as zero, and
  // the next gradient to arrive is written over it instead of added to it (a product's weight
  // gradient then never reads it). grad() writes the zeros if it is asked first; code that
  // reads the buffer another way (a flat view of many) checks grad_is_stale() or calls grad()
  // first. Not a buffer: as zero_grad.
  void zero_grad_lazily() const;
  bool grad_is_stale() const { return impl_->meta->grad_is_stale; }
  // The same value cut off from the graph (shares storage; requires no gradient).
  Var detach() const { return Var(impl_->data, false); }

  // Makes `grad` (contiguous, same shape; zeroed, or given the gradient so far) the gradient
  // buffer of this leaf.
  void bind_grad_buffer(const Tensor& grad);
  // Moves this leaf's value into `buffer` (same shape and dtype; e.g. a view of an optimizer's
  // flat parameter storage): the value is copied there and the buffer becomes the value.
  void bind_data_buffer(const Tensor& buffer);

  VarImpl* impl() const ROSETTA_LIFETIMEBOUND { return impl_.get(); }
  const std::shared_ptr<AutogradMeta>& meta() const ROSETTA_LIFETIMEBOUND { return impl_->meta; }
  bool same(const Var& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<VarImpl> impl_;
};

// Writes the zeros of the stale gradient buffers among `vars` (Var::zero_grad_lazily): for code
// that reads their buffers through a flat view of them rather than through grad().
void settle_grads(const std::vector<Var>& vars);

// A tensor saved for backward, with the storage version it had when saved: reading it after
// an in-place write throws instead of computing a wrong gradient.
class Saved {
 public:
  Saved() = default;
  explicit Saved(const Tensor& t) : t_(t), version_(t.version()) {}
  const Tensor& get() const ROSETTA_LIFETIMEBOUND;
  bool defined() const { return t_.defined(); }

 private:
  Tensor t_;
  uint64_t version_ = 0;
};

// Where an op's backward writes the gradient of one input: a core backward kernel writes it
// into `out` with `beta` (out = beta * out + gradient), then commit() makes it count.
//   beta 1: `out` is the input's gradient itself (a bound buffer, or a gradient this graph
//           alone holds): the kernel adds to it in place, and commit() has nothing to do.
//   beta 0: `out` is a fresh tensor (uninitialised) the kernel overwrites; commit() makes it the
//           gradient, or adds it to the gradient that has arrived meanwhile (an input used
//           twice by one op). Or `out` is a stale buffer (Var::zero_grad_lazily), overwritten in
//           place, and commit() has nothing to do.
// Undefined `out`: the input needs no gradient; the kernels then skip it.
class GradDest : public GradOut {
 public:
  void commit();

 private:
  friend struct Node;
  AutogradMeta* meta_ = nullptr;
};

// A recorded op. `backward` receives the gradient of the op's output and adds to the gradients
// of its inputs, through grad_dest (a gradient it computes) or pass_view (one that is a view of
// the upstream gradient). Never by itself: the buffers, the sharing and the layouts are theirs.
struct Node {
  using BackwardFn = std::function<void(const Tensor& grad_out, Node& self)>;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Frees the chain of nodes behind this one iteratively: a graph 100,000 ops deep would
  // otherwise be destroyed by as many nested destructor calls.
  ~Node();

  const char* name = "";
  std::vector<std::shared_ptr<AutogradMeta>> inputs;  // null where the input needs no gradient
  BackwardFn backward;                           // empty once released
  bool released = false;
  // Set during a backward that releases the graph after this node: its saved tensors will not
  // be needed again, so the backward function may write over those nobody else holds.
  bool last_use = false;

  bool needs(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  // Where to write input i's gradient (see GradDest): its gradient itself with beta 1 when that
  // may be written in place (a bound buffer, or a contiguous tensor no one else holds), else a
  // fresh contiguous tensor with beta 0.
  //   like:  a fresh intermediate gradient is laid out as `like` when that is dense (matmul's
  //          operands: a permuted view's gradient leaves its view contiguous), and a gradient
  //          with like's strides is written in place too;
  //   reuse: a contiguous tensor of the input's shape no one else holds (cross-entropy's
  //          logits after their last use), taken as the fresh tensor instead of allocating.
  GradDest grad_dest(size_t i, const Tensor& like = Tensor(), const Tensor& reuse = Tensor());
  // inputs[i].grad += g for a g that is a view of the upstream gradient (dy itself, a reshape,
  // a slice): taken as the gradient without a copy when there is none yet.
  void pass_view(size_t i, const Tensor& g);
};

// Records an op: when gradients are enabled and any input requires one, gives `out` a node
// with the given backward function.
void record(Var& out, const char* name, std::initializer_list<const Var*> inputs,
            Node::BackwardFn backward);
void record(Var& out, const char* name, const std::vector<const Var*>& inputs,
            Node::BackwardFn backward);
bool any_requires_grad(std::initializer_list<const Var*> inputs);

// Gradient mode (thread-local). While a NoGradGuard lives, ops record nothing.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace rosetta
