// Module: the base of every layer. Parameters, buffers and child modules are registered under
// names, so named_parameters() yields dotted keys such as
// "decoder.layers.2.cross_attn.q_proj.weight", which are also the checkpoint keys.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/autograd/var.h"
#include "rosetta/core/lifetime.h"

// Declares an option with a chainable setter and a getter, as LibTorch's TORCH_ARG:
//   struct LinearOptions { ROSETTA_ARG(bool, bias) = true; };   LinearOptions().bias(false)
// On a temporary the setter returns the options by value (rosetta/core/lifetime.h), so that
// `const auto& o = LinearOptions(4, 2).bias(false);` cannot dangle.
#define ROSETTA_ARG(T, name)                                          \
 public:                                                              \
  auto& name(const T& v)& {                                           \
    name##_ = v;                                                      \
    return *this;                                                     \
  }                                                                   \
  auto name(const T& v)&& {                                           \
    name##_ = v;                                                      \
    return std::move(*this);                                          \
  }                                                                   \
  const T& name() const ROSETTA_LIFETIMEBOUND { return name##_; }     \
                                                                      \
 private:                                                             \
  T name##_

namespace rosetta::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters of this module and its children, in registration order, with dotted names.
  // A parameter shared by several modules (tied weights) is listed once, under its first name.
  std::vector<std::pair<std::string, Var>> named_parameters() const;
  std::vector<Var> parameters() const;
  NamedTensors named_buffers() const;  // persistent buffers only
  int64_t parameter_count() const;
  // This module and every module below it, depth first in registration order, each once.
  std::vector<const Module*> modules() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();

  // Parameters and persistent buffers, by dotted name.
  NamedTensors state_dict() const;
  // Copies values in by name. Every missing, unexpected, mis-shaped or mis-typed entry is
  // collected and reported in one error, naming each; nothing is modified then.
  void load_state_dict(const NamedTensors& state);

  // Checkpoints in safetensors: the state dict plus string metadata (e.g. the config).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  // Loads a checkpoint written by save() (strictly, as load_state_dict) and returns its
  // metadata. Errors start with the path.
  std::map<std::string, std::string> load(const std::string& path);

 protected:
  Var register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  // Registers an existing parameter (e.g. a tied weight) under this module.
  Var register_parameter(const std::string& name, const Var& shared);
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_name(const std::string& name) const;
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Var>>& params,
               NamedTensors* buffers) const;

  struct Buffer {
    std::string name;
    Tensor value;
    bool persistent;
  };
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A module of one input and one output, y = forward(x): what Sequential chains. Linear,
// LayerNorm, Dropout, FeedForward, ReLU and GELU are ones. Modules of other signatures
// (attention, the Transformer) derive from Module and declare the forward they need.
class UnaryModule : public Module {
 public:
  virtual Var forward(const Var& x) const = 0;
};

}  // namespace rosetta::nn
