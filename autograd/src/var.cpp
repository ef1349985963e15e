// The reverse-mode engine: an iterative topological sort from the root, then a reverse walk in
// which each node adds to its inputs' gradients, through the one gradient-destination contract
// (Node::grad_dest, Node::pass_view).
#include "rosetta/autograd/var.h"

#include <unordered_set>

#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

Var::Var(Tensor data, bool requires_grad) : impl_(std::make_shared<VarImpl>()) {
  ROSETTA_CHECK(data.defined(), "Var: undefined tensor");
  ROSETTA_CHECK(!requires_grad || data.dtype() != DType::i32,
                "Var: an I32 tensor cannot require a gradient");
  impl_->meta = std::make_shared<AutogradMeta>();
  impl_->meta->requires_grad = requires_grad;
  impl_->meta->shape = data.shape();
  impl_->meta->dtype = data.dtype();
  impl_->data = std::move(data);
}

void Var::set_data(const Tensor& t) {
  ROSETTA_CHECK(t.shape() == shape() && t.dtype() == dtype(), "set_data: new value ", t.shape(),
                " ", dtype_name(t.dtype()), " does not match ", shape(), " ",
                dtype_name(dtype()));
  impl_->data.copy_(t);  // in place: views of this value (e.g. a flat buffer) stay valid
}

Var& Var::set_requires_grad(bool on) {
  ROSETTA_CHECK(is_leaf(), "set_requires_grad: only leaves can change requires_grad");
  ROSETTA_CHECK(!on || dtype() != DType::i32, "Var: an I32 tensor cannot require a gradient");
  impl_->meta->requires_grad = on;
  return *this;
}

const Tensor& Var::grad() const {
  AutogradMeta& m = *impl_->meta;
  if (m.grad_is_stale) {
    m.grad.zero_();
    m.grad_is_stale = false;
  }
  return m.grad;
}

void Var::zero_grad() const {
  AutogradMeta& m = *impl_->meta;
  if (!m.grad.defined()) return;
  if (m.grad_is_buffer) m.grad.zero_();
  else m.grad = Tensor();
  m.grad_is_stale = false;
}

void Var::zero_grad_lazily() const {
  AutogradMeta& m = *impl_->meta;
  if (m.grad_is_buffer) m.grad_is_stale = true;
  else zero_grad();
}

void settle_grads(const std::vector<Var>& vars) {
  for (const Var& v : vars)
    if (v.grad_is_stale()) v.grad();  // writes its zeros
}

void Var::bind_grad_buffer(const Tensor& grad) {
  ROSETTA_CHECK(is_leaf(), "bind_grad_buffer: only leaves have gradient buffers");
  ROSETTA_CHECK(grad.shape() == shape() && grad.dtype() == dtype(), "bind_grad_buffer: buffer ",
                grad.shape(), " does not match ", shape());
  ROSETTA_CHECK(grad.is_contiguous(), "bind_grad_buffer: buffer ", grad.shape(), " with strides ",
                grad.strides(), " is not contiguous");
  AutogradMeta& m = *impl_->meta;
  Tensor g = grad;
  if (m.grad.defined()) g.copy_(m.grad);
  else g.zero_();
  m.grad = g;
  m.grad_is_buffer = true;
  m.grad_is_stale = false;
}

void Var::bind_data_buffer(const Tensor& buffer) {
  ROSETTA_CHECK(is_leaf(), "bind_data_buffer: only leaves can move their value");
  ROSETTA_CHECK(buffer.shape() == shape() && buffer.dtype() == dtype(), "bind_data_buffer: buffer ",
                buffer.shape(), " does not match ", shape());
  Tensor b = buffer;
  b.copy_(impl_->data);
  impl_->data = b;
}

const Tensor& Saved::get() const {
  ROSETTA_CHECK(t_.version() == version_,
                "backward: a tensor saved for the gradient was modified in place after it was "
                "saved (version ", version_, " -> ", t_.version(),
                "); clone it before writing, or run backward first");
  return t_;
}

// ------------------------------------------------------------------ gradient destinations

namespace {
// Whether v's gradient may be added to in place: a bound buffer, or storage no one else holds
// (a sibling's gradient sharing it, or a user's handle, would see the write).
bool writable(const AutogradMeta& v) {
  return v.grad_is_buffer || v.grad.storage().use_count() == 1;
}

// v.grad += g: in place where allowed, else into a new tensor. A stale buffer takes g itself.
void add_to(AutogradMeta& v, const Tensor& g) {
  if (v.grad_is_stale) v.grad.copy_(g);
  else if (writable(v)) add_(v.grad, g);
  else v.grad = add(v.grad, g);
  v.grad_is_stale = false;
}

// v.grad += g, for a g that is a view of the upstream gradient.
void pass_into(AutogradMeta& v, const Tensor& g) {
  ROSETTA_CHECK(g.shape() == v.shape, "backward: gradient ", g.shape(),
                " does not match its variable ", v.shape);
  if (v.grad.defined()) return add_to(v, g);
  // An intermediate's gradient is only read, by its own node's backward: take the tensor even
  // when its storage is shared (a view of the upstream gradient, a sibling's gradient) or
  // permuted (the way back through a permute or transpose), copying only when it has gaps or
  // overlaps (an expanded view). A leaf's gradient is handed to the user and the optimizer, who
  // write into it: it gets contiguous storage of its own.
  if (v.grad_fn) v.grad = g.is_dense() ? g : g.contiguous();
  else v.grad = g.storage().use_count() == 1 && g.is_contiguous() ? g : g.clone();
}
}  // namespace

GradDest Node::grad_dest(size_t i, const Tensor& like, const Tensor& reuse) {
  GradDest d;
  if (!needs(i)) return d;
  AutogradMeta& v = *inputs[i];
  if (v.grad_is_stale) {
    // The buffer's first gradient since it was counted as zero: written over it (beta 0, nothing
    // to commit), unless the variable is another input of this op too, whose gradient would then
    // be written over this one.
    bool repeated = false;
    for (size_t j = 0; j < inputs.size(); ++j) repeated = repeated || (j != i && inputs[j].get() == &v);
    v.grad_is_stale = false;
    if (!repeated) {
      d.out = v.grad;
      return d;
    }
    v.grad.zero_();
  }
  d.meta_ = &v;
  // A leaf's gradient is always contiguous (see pass_into).
  const bool laid_out = like.defined() && v.grad_fn && like.is_dense();
  if (v.grad.defined() && writable(v) &&
      (v.grad.is_contiguous() || (laid_out && v.grad.strides() == like.strides()))) {
    d.out = v.grad;
    d.beta = 1;
    return d;
  }
  if (reuse.defined()) {
    ROSETTA_CHECK(reuse.shape() == v.shape && reuse.is_contiguous(), "grad_dest: tensor to reuse ",
                  reuse.shape(), " is not a contiguous ", v.shape);
    d.out = reuse;
  } else {
    d.out = laid_out ? Tensor::empty_like(like) : Tensor::empty(v.shape, v.dtype);
  }
  return d;
}

void GradDest::commit() {
  if (!meta_ || beta != 0) return;  // nothing wanted, or written in place
  if (meta_->grad.defined()) add_to(*meta_, out);
  else meta_->grad = out;
  meta_ = nullptr;
}

void Node::pass_view(size_t i, const Tensor& g) {
  if (needs(i)) pass_into(*inputs[i], g);
}

Node::~Node() {
  std::vector<std::shared_ptr<AutogradMeta>> pending = std::move(inputs);
  while (!pending.empty()) {
    std::shared_ptr<AutogradMeta> m = std::move(pending.back());
    pending.pop_back();
    // When we hold the last reference to an input whose node nobody else holds, take that
    // node's inputs over before letting it go, so its destructor has nothing left to recurse on.
    if (m && m.use_count() == 1 && m->grad_fn && m->grad_fn.use_count() == 1) {
      for (auto& in : m->grad_fn->inputs) pending.push_back(std::move(in));
      m->grad_fn->inputs.clear();
    }
  }
}

bool any_requires_grad(std::initializer_list<const Var*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Var* v : inputs)
    if (v && v->requires_grad()) return true;
  return false;
}

void record(Var& out, const char* name, const std::vector<const Var*>& inputs,
            Node::BackwardFn backward) {
  if (!g_grad_enabled) return;
  bool any = false;
  for (const Var* v : inputs) any = any || (v && v->requires_grad());
  if (!any) return;
  auto node = std::make_shared<Node>();
  node->name = name;
  for (const Var* v : inputs) node->inputs.push_back(v && v->requires_grad() ? v->meta() : nullptr);
  node->backward = std::move(backward);
  out.meta()->grad_fn = std::move(node);
  out.meta()->requires_grad = true;
}

void record(Var& out, const char* name, std::initializer_list<const Var*> inputs,
            Node::BackwardFn backward) {
  record(out, name, std::vector<const Var*>(inputs), std::move(backward));
}

// ------------------------------------------------------------------ backward

void Var::backward(bool retain_graph) const {
  ROSETTA_CHECK(numel() == 1, "backward: output of shape ", shape(),
                " is not a scalar; pass the upstream gradient");
  backward(Tensor::ones(shape(), dtype()), retain_graph);
}

void Var::backward(const Tensor& grad_output, bool retain_graph) const {
  ROSETTA_CHECK(requires_grad(), "backward: this value does not require a gradient (no input ",
                "requires one, or it was computed under NoGradGuard)");
  ROSETTA_CHECK(grad_output.shape() == shape(), "backward: upstream gradient ",
                grad_output.shape(), " does not match output ", shape());
  NoGradGuard no_grad;  // backward itself records nothing

  // Iterative depth-first post-order over the nodes reachable from the root.
  AutogradMeta* root = impl_->meta.get();
  std::vector<AutogradMeta*> order;
  std::unordered_set<AutogradMeta*> seen;
  std::vector<std::pair<AutogradMeta*, size_t>> stack{{root, 0}};
  seen.insert(root);
  while (!stack.empty()) {
    auto& [v, next] = stack.back();
    Node* node = v->grad_fn.get();
    if (node && next < node->inputs.size()) {
      AutogradMeta* in = node->inputs[next++].get();
      if (in && in->grad_fn && seen.insert(in).second) stack.push_back({in, 0});
      continue;
    }
    order.push_back(v);
    stack.pop_back();
  }

  pass_into(*root, grad_output.to(dtype()).contiguous());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    AutogradMeta* v = *it;
    if (!v->grad_fn) continue;  // a leaf root keeps its gradient
    Node& node = *v->grad_fn;
    ROSETTA_CHECK(!node.released, "backward: the graph through '", node.name,
                  "' was already released by an earlier backward; pass retain_graph = true to ",
                  "the first backward to go through it twice");
    if (!v->grad.defined()) continue;  // no gradient reached this value
    const Tensor g = std::move(v->grad);
    v->grad = Tensor();  // intermediate gradients are not kept
    node.last_use = !retain_graph;
    node.backward(g, node);
    if (!retain_graph) {
      node.backward = nullptr;  // frees the saved tensors
      node.released = true;
    }
  }
}

}  // namespace rosetta
