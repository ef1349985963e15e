// Fused nn ops: each is one core kernel forward and one backward, instead of a chain of
// elementwise nodes (fewer passes over memory, fewer saved tensors).
#include "rosetta/autograd/functions.h"
#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// y = softmax(x)   =>  dx += y * (dy - sum(dy * y))
// Masked entries have y = 0, so the same backward gives them a zero gradient.
void softmax_grad(const Tensor& y, const Tensor& dy, Node& n) {
  GradDest d = n.grad_dest(0);
  softmax_backward(y, dy, d);
  d.commit();
}
}  // namespace

Var softmax(const Var& x) {
  Var out(rosetta::softmax(x.data()));
  record(out, "softmax", {&x},
         [sy = Saved(out.data())](const Tensor& dy, Node& n) { softmax_grad(sy.get(), dy, n); });
  return out;
}

Var softmax(const Var& x, const Tensor& mask) {
  if (!mask.defined()) return softmax(x);
  Var out(rosetta::softmax(x.data(), mask));
  record(out, "masked_softmax", {&x},
         [sy = Saved(out.data())](const Tensor& dy, Node& n) { softmax_grad(sy.get(), dy, n); });
  return out;
}

// y = log_softmax(x)   =>  dx += dy - exp(y) * sum(dy)
Var log_softmax(const Var& x) {
  Var out(rosetta::log_softmax(x.data()));
  record(out, "log_softmax", {&x}, [sy = Saved(out.data())](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    log_softmax_backward(sy.get(), dy, d);
    d.commit();
  });
  return out;
}

// y = (x - mean) * rstd * gamma + beta   (backward: see core layer_norm_backward)
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  LayerNormResult r = layer_norm_forward(x.data(), gamma.data(), beta.data(), eps);
  Var out(r.y);
  record(out, "layer_norm", {&x, &gamma, &beta},
         [sx = Saved(x.data()), sg = Saved(gamma.data()), mean = r.mean, rstd = r.rstd](
             const Tensor& dy, Node& n) {
           GradDest dx = n.grad_dest(0), dgamma = n.grad_dest(1), dbeta = n.grad_dest(2);
           layer_norm_backward(dy, sx.get(), mean, rstd, sg.get(), dx, dgamma, dbeta);
           dx.commit();
           dgamma.commit();
           dbeta.commit();
         });
  return out;
}

// y = x * mask, mask = Bernoulli(1 - p) / (1 - p)   =>  dx += dy * mask
// The mask is not stored: backward regenerates it from the generator's (seed, offset).
Var dropout(const Var& x, double p, Generator& gen, bool training) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  if (!training || p == 0.0) return x;
  const uint64_t seed = gen.seed(), offset = gen.reserve(uint64_t(x.numel()));
  Var out(rosetta::dropout(x.data(), p, seed, offset));
  record(out, "dropout", {&x}, [p, seed, offset](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    dropout_backward(dy, p, seed, offset, d);
    d.commit();
  });
  return out;
}

// y = residual + dropout(x)   =>  dresidual += dy, dx += dropout(dy) (the same mask)
Var dropout_add(const Var& residual, const Var& x, double p, Generator& gen, bool training) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  ROSETTA_CHECK(residual.shape() == x.shape(), "dropout_add: residual ", residual.shape(), " and ", x.shape(),
                " differ");
  if (!training || p == 0.0) return residual + x;
  const uint64_t seed = gen.seed(), offset = gen.reserve(uint64_t(x.numel()));
  Var out(rosetta::dropout_add(residual.data(), x.data(), p, seed, offset));
  record(out, "dropout_add", {&residual, &x}, [p, seed, offset](const Tensor& dy, Node& n) {
    if (n.needs(0)) n.pass_view(0, dy);
    GradDest d = n.grad_dest(1);
    dropout_backward(dy, p, seed, offset, d);
    d.commit();
  });
  return out;
}

// y = dropout(relu(x)); dx = dy / (1-p) where y != 0 (kept and x > 0), else 0. Saves y alone.
Var relu_dropout(const Var& x, double p, Generator& gen, bool training) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  if (!training || p == 0.0) return relu(x);
  const uint64_t seed = gen.seed(), offset = gen.reserve(uint64_t(x.numel()));
  Var out(rosetta::relu_dropout(x.data(), p, seed, offset));
  record(out, "relu_dropout", {&x}, [p, sy = Saved(out.data())](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    // 1 / (1 - p): the factor dropout applies, rounded as it rounds it.
    unary_backward(UnaryOp::relu, sy.get(), Tensor(), dy, d, 1.0 / (1.0 - p));
    d.commit();
  });
  return out;
}

// y[s] = weight[ids[s]]   =>  dweight[ids[s]] += dy[s] (except padding_idx)
Var embedding(const Var& weight, const Tensor& ids, int32_t padding_idx) {
  Var out(index_select(weight.data(), ids));
  record(out, "embedding", {&weight}, [ids, padding_idx](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    index_select_backward(ids, dy, d, padding_idx);
    d.commit();
  });
  return out;
}

// loss = mean over kept rows of (1-eps) * -log p[t] + eps * mean_j -log p_j
Var cross_entropy(const Var& logits, const Tensor& targets, double label_smoothing,
                  int32_t ignore_index) {
  ROSETTA_CHECK(logits.dim() >= 1, "cross_entropy: logits need a class axis");
  const int64_t V = logits.shape().back();
  Shape rows_shape = logits.shape();
  rows_shape.resize(rows_shape.size() - 1);
  ROSETTA_CHECK(targets.shape() == rows_shape, "cross_entropy: targets ", targets.shape(),
                " do not match logits ", logits.shape());
  const Tensor L = logits.data().reshape({-1, V});
  const Tensor T = targets.reshape({-1});
  CrossEntropyResult r = cross_entropy_forward(L, T, label_smoothing, ignore_index);
  Var out(r.loss);
  record(out, "cross_entropy", {&logits},
         [sl = Saved(L), T, lse = r.lse, count = r.count, label_smoothing, ignore_index,
          shape = logits.shape()](const Tensor& dy, Node& n) {
           const Tensor saved = sl.get();
           // The logits (often the largest activation) become their own gradient when nothing
           // else holds them and the graph is released after this: one [N, V] buffer, not two.
           const bool reusable = n.last_use && saved.is_contiguous() && saved.storage().use_count() == 2;
           GradDest d = n.grad_dest(0, Tensor(), reusable ? saved.view(shape) : Tensor());
           cross_entropy_backward(saved, T, lse, label_smoothing, ignore_index, count, dy.item(),
                                  {d.out.defined() ? d.out.view(saved.shape()) : Tensor(), d.beta});
           d.commit();
         });
  return out;
}

}  // namespace rosetta
