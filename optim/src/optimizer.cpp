#include "rosetta/optim/optimizer.h"

#include <omp.h>

#include <cmath>
#include <type_traits>
#include <unordered_set>

#include "rosetta/core/safetensors.h"

namespace rosetta::optim {

namespace {
// Element count above which the update loop goes parallel.
constexpr int64_t kGrain = 1 << 14;

// Calls f(begin, end) on one contiguous chunk per thread (inline when n is small). The
// update loops inside are plain `omp simd` loops over locals, which vectorise. Inline, they
// run on a copy of f: f's address escapes into the parallel region, so in f itself GCC reloads
// every captured value each iteration and leaves the loop scalar (4x slower on one thread).
template <class F>
void parallel_chunks(int64_t n, F&& f) {
  if (n < kGrain || omp_get_max_threads() == 1) {
    std::decay_t<F> local(f);
    local(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    f(n * t / nt, n * (t + 1) / nt);
  }
}
}  // namespace

Optimizer::Optimizer(std::vector<Var> params, double lr) : params_(std::move(params)), lr_(lr) {
  ROSETTA_CHECK(!params_.empty(), "optimizer: no parameters");
  set_lr(lr);
  int64_t n = 0;
  std::unordered_set<const AutogradMeta*> seen;
  for (const Var& p : params_) {
    ROSETTA_CHECK(p.defined() && p.is_leaf() && p.requires_grad(),
                  "optimizer: parameters must be leaves that require a gradient");
    ROSETTA_CHECK(p.dtype() == DType::f32, "optimizer: parameters must be F32, got ",
                  dtype_name(p.dtype()));
    ROSETTA_CHECK(seen.insert(p.meta().get()).second, "optimizer: a parameter is listed twice");
    n += p.numel();
  }
  data_ = Tensor::empty({n});
  grad_ = Tensor::zeros({n});
  int64_t at = 0;
  for (Var& p : params_) {
    const int64_t k = p.numel();
    p.bind_data_buffer(data_.narrow(0, at, k).view(p.shape()));
    p.bind_grad_buffer(grad_.narrow(0, at, k).view(p.shape()));
    at += k;
  }
}

void Optimizer::set_lr(double lr) {
  ROSETTA_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: learning rate ", lr, " is not a ",
                "finite non-negative number");
  lr_ = lr;
}

std::map<std::string, std::string> Optimizer::state_metadata() const {
  return {{"optim.type", name()},
          {"optim.step", std::to_string(step_)},
          {"optim.numel", std::to_string(numel())}};
}

void Optimizer::load_state(const std::function<const Tensor*(const std::string&)>& find,
                           const std::map<std::string, std::string>& meta) {
  auto get = [&](const std::string& key) {
    auto it = meta.find(key);
    ROSETTA_CHECK(it != meta.end(), "optimizer state: no ", key, " in the checkpoint");
    return it->second;
  };
  ROSETTA_CHECK(get("optim.type") == name(), "optimizer state is for '", get("optim.type"),
                "', this run uses '", name(), "'");
  ROSETTA_CHECK(get("optim.numel") == std::to_string(numel()), "optimizer state holds ",
                get("optim.numel"), " values, the model has ", numel());
  const int64_t step = metadata_int(meta, "optim.step", "optimizer state");
  ROSETTA_CHECK(step >= 0, "optimizer state: negative step ", step);
  std::vector<std::pair<Tensor*, const Tensor*>> loads;
  for (auto& [n, dst] : buffers()) {
    const Tensor* src = find(n);
    ROSETTA_CHECK(src != nullptr, "optimizer state: no ", n, " in the checkpoint");
    ROSETTA_CHECK(src->shape() == dst->shape() && src->dtype() == dst->dtype(), "optimizer state: ",
                  n, " is ", src->shape(), " ", dtype_name(src->dtype()), ", expected ",
                  dst->shape(), " ", dtype_name(dst->dtype()));
    loads.emplace_back(dst, src);
  }
  for (auto& [dst, src] : loads) dst->copy_(*src);
  step_ = step;
}

void Optimizer::zero_grad_lazily() {
  for (const Var& p : params_) p.zero_grad_lazily();
}

const Tensor& Optimizer::flat_grads() const {
  settle_grads(params_);
  return grad_;
}

// ------------------------------------------------------------------ SGD

SGD::SGD(std::vector<Var> params, const SGDOptions& o) : Optimizer(std::move(params), o.lr), o_(o) {
  ROSETTA_CHECK(o.momentum >= 0 && o.weight_decay >= 0 && o.dampening >= 0,
                "SGD: momentum, dampening and weight decay must be non-negative");
  ROSETTA_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                "SGD: Nesterov momentum needs momentum > 0 and no dampening");
  if (o.momentum > 0) momentum_ = zeros_like_flat();
}

// g = grad + wd * p
// buf = g (first step) | momentum * buf + (1 - dampening) * g
// g = nesterov ? g + momentum * buf : buf
// p -= lr * g
void SGD::step() {
  float* p = data_.data<float>();
  const float* grad = flat_grads().data<float>();
  float* buf = momentum_.defined() ? momentum_.data<float>() : nullptr;
  const float wd = float(o_.weight_decay), mom = float(o_.momentum),
              damp = float(1.0 - o_.dampening), lr = float(lr_);
  const bool first = step_ == 0, nesterov = o_.nesterov;
  parallel_chunks(numel(), [=](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      float g = grad[i] + p[i] * wd;
      if (buf) {
        buf[i] = first ? g : buf[i] * mom + g * damp;
        g = nesterov ? g + buf[i] * mom : buf[i];
      }
      p[i] += g * -lr;
    }
  });
  data_.bump_version();
  ++step_;
}

NamedTensors SGD::state_tensors() const {
  if (!momentum_.defined()) return {};
  return {{"optim.momentum", momentum_}};
}

std::vector<std::pair<std::string, Tensor*>> SGD::buffers() {
  if (!momentum_.defined()) return {};
  return {{"optim.momentum", &momentum_}};
}

// ------------------------------------------------------------------ Adam / AdamW

Adam::Adam(std::vector<Var> params, const AdamOptions& o) : Optimizer(std::move(params), o.lr), o_(o) {
  ROSETTA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                "Adam: betas (", o.beta1, ", ", o.beta2, ") outside [0, 1)");
  ROSETTA_CHECK(o.eps >= 0 && o.weight_decay >= 0, "Adam: eps and weight decay must be non-negative");
  exp_avg_ = zeros_like_flat();
  exp_avg_sq_ = zeros_like_flat();
}

// AdamW: p *= 1 - lr * wd;  Adam (L2): g = grad + wd * p
// m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void Adam::step() {
  ++step_;
  const double bc1 = 1.0 - std::pow(o_.beta1, double(step_));
  const double bc2 = 1.0 - std::pow(o_.beta2, double(step_));
  const float step_size = float(lr_ / bc1), bc2_sqrt = float(std::sqrt(bc2));
  const float b1 = float(o_.beta1), b2 = float(o_.beta2), one_b1 = float(1.0 - o_.beta1),
              one_b2 = float(1.0 - o_.beta2), eps = float(o_.eps), wd = float(o_.weight_decay),
              decay = float(1.0 - lr_ * o_.weight_decay);
  const bool decoupled = o_.decoupled;
  float* p = data_.data<float>();
  const float* grad = flat_grads().data<float>();
  float *m = exp_avg_.data<float>(), *v = exp_avg_sq_.data<float>();
  // Decoupled decay multiplies p by `decay` (1 when there is none); L2 decay adds wd_l2 * p.
  const float pd = decoupled ? decay : 1.0f, wd_l2 = decoupled ? 0.0f : wd;
  parallel_chunks(numel(), [=](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      const float pi = p[i] * pd;
      const float g = grad[i] + pi * wd_l2;
      const float mi = m[i] * b1 + g * one_b1;
      const float vi = v[i] * b2 + g * g * one_b2;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi + -step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
    }
  });
  data_.bump_version();
}

NamedTensors Adam::state_tensors() const {
  return {{"optim.exp_avg", exp_avg_}, {"optim.exp_avg_sq", exp_avg_sq_}};
}

std::vector<std::pair<std::string, Tensor*>> Adam::buffers() {
  return {{"optim.exp_avg", &exp_avg_}, {"optim.exp_avg_sq", &exp_avg_sq_}};
}

// ------------------------------------------------------------------ clipping

double grad_norm(const Optimizer& opt) {
  const float* g = opt.flat_grads().data<float>();
  const int64_t n = opt.numel();
  // The threads' partial sums added in their order: the same norm on every call (see ordered_sum).
  const double s = detail::ordered_sum(n, n >= kGrain, [g](int64_t b, int64_t e) {
    const float* g_ = g;  // a local, not the capture: the loop vectorises
    double part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = b; i < e; ++i) part += double(g_[i]) * g_[i];
    return part;
  });
  return std::sqrt(s);
}

double clip_grad_norm(Optimizer& opt, double max_norm) {
  ROSETTA_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got ", max_norm);
  const double norm = grad_norm(opt);
  if (std::isfinite(norm) && norm > max_norm) {
    const float scale = float(max_norm / (norm + 1e-6));
    float* g = opt.flat_grads().data<float>();
    parallel_chunks(opt.numel(), [=](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) g[i] *= scale;
    });
    opt.flat_grads().bump_version();
  }
  return norm;
}

}  // namespace rosetta::optim
