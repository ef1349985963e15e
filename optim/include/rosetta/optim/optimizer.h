// Optimizers over flat buffers.
//
// On construction, an optimizer moves every parameter's value into one contiguous buffer and
// gives every parameter a gradient buffer that is a view of a second one; moment buffers have
// the same layout. A step is then a single parallel loop over N = total parameter count,
// whatever the number of parameter tensors, and zero_grad is one memset.
//
// Update rules are PyTorch 1.13's (torch.optim.SGD, Adam, AdamW), written in float32 with the
// same operation order, so trajectories match PyTorch's to float rounding.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/autograd/var.h"
#include "rosetta/core/lifetime.h"

namespace rosetta::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  // The parameters must be distinct float32 leaves requiring a gradient.
  Optimizer(std::vector<Var> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the accumulated gradients; increments steps().
  virtual void step() = 0;
  void zero_grad() { grad_.zero_(); }
  // zero_grad without the pass over the buffer: each parameter's gradient counts as zero and
  // its next gradient is written over it (Var::zero_grad_lazily). flat_grads() and step() give
  // their zeros to the parameters that no gradient reached by then.
  void zero_grad_lazily();

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return step_; }
  int64_t numel() const { return data_.numel(); }
  const std::vector<Var>& params() const ROSETTA_LIFETIMEBOUND { return params_; }
  const Tensor& flat_params() const ROSETTA_LIFETIMEBOUND { return data_; }  // [N]
  const Tensor& flat_grads() const ROSETTA_LIFETIMEBOUND;  // [N]

  // State for exact resume: tensors named "optim.<buffer>" and metadata "optim.<key>".
  virtual NamedTensors state_tensors() const = 0;
  virtual std::map<std::string, std::string> state_metadata() const;
  // Restores what state_tensors() / state_metadata() saved; `find` looks a tensor up by name
  // (returns nullptr if absent). Throws naming the entry that is missing or mis-shaped.
  void load_state(const std::function<const Tensor*(const std::string&)>& find,
                  const std::map<std::string, std::string>& metadata);
  virtual const char* name() const = 0;

 protected:
  virtual std::vector<std::pair<std::string, Tensor*>> buffers() = 0;
  Tensor zeros_like_flat() const { return Tensor::zeros({numel()}, DType::f32); }

  std::vector<Var> params_;
  Tensor data_, grad_;  // [N] float32
  double lr_;
  int64_t step_ = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2, added to the gradient
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Var> params, const SGDOptions& options);
  void step() override;
  NamedTensors state_tensors() const override;
  const char* name() const override { return "sgd"; }

 protected:
  std::vector<std::pair<std::string, Tensor*>> buffers() override;

 private:
  SGDOptions o_;
  Tensor momentum_;  // [N]
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // false: Adam with L2 (decay added to the gradient); true: AdamW (decoupled decay,
  // p *= 1 - lr * weight_decay before the update).
  bool decoupled = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Var> params, const AdamOptions& options);
  void step() override;
  NamedTensors state_tensors() const override;
  const char* name() const override { return o_.decoupled ? "adamw" : "adam"; }

 protected:
  std::vector<std::pair<std::string, Tensor*>> buffers() override;

 private:
  AdamOptions o_;
  Tensor exp_avg_, exp_avg_sq_;  // [N]
};

// AdamW is Adam with decoupled weight decay.
inline std::unique_ptr<Adam> make_adamw(std::vector<Var> params, AdamOptions options) {
  options.decoupled = true;
  return std::make_unique<Adam>(std::move(params), options);
}

// Scales all gradients so that their global L2 norm is at most max_norm (as PyTorch's
// clip_grad_norm_: factor max_norm / (norm + 1e-6) when norm > max_norm). Returns the norm
// before clipping (inf or NaN if a gradient is not finite, and then nothing is scaled).
double clip_grad_norm(Optimizer& opt, double max_norm);
// The global L2 norm of the gradients.
double grad_norm(const Optimizer& opt);

}  // namespace rosetta::optim
