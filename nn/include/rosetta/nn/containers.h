// Containers of modules, as LibTorch's. A ModuleList registers its modules as the children
// "0", "1", ..., so a list registered as "blocks" yields blocks.0.attn.q_proj.weight:
//
//   blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
//   blocks->push_back(std::make_shared<Block>(...));      // blocks.0.*
//   for (const auto& block : *blocks) ...                  // std::shared_ptr<Module>
//   blocks->ptr<Block>(0)->forward(x);                     // checked downcast
//
// ModuleListOf<T> holds T's only, so its elements need no casts; Sequential chains modules of
// one input and one output (UnaryModule) and is one itself:
//
//   auto mlp = std::make_shared<nn::Sequential>(
//       std::make_shared<nn::Linear>(nn::LinearOptions(D, F), gen), std::make_shared<nn::ReLU>(),
//       std::make_shared<nn::Linear>(nn::LinearOptions(F, D), gen));
//   Var y = mlp->forward(x);                               // linear(relu(linear(x)))
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/lifetime.h"
#include "rosetta/nn/module.h"

namespace rosetta::nn {

// A list of modules of type T, registered as children "0", "1", .... Base is what the list
// itself is: a Module, or a UnaryModule for Sequential.
template <class T, class Base = Module>
class ModuleListOf : public Base {
  static_assert(std::is_base_of_v<Module, T> && std::is_base_of_v<Module, Base>);

 public:
  ModuleListOf() = default;
  template <class... M>
  explicit ModuleListOf(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }

  // Registers `module` as child size(). A list already registered in a parent may grow: the
  // parent's named_parameters() and state_dict() follow.
  void push_back(std::shared_ptr<T> module) {
    this->register_module(std::to_string(modules_.size()), module);
    modules_.push_back(std::move(module));
  }

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Both are checked: an index out of range throws.
  const std::shared_ptr<T>& at(size_t i) const ROSETTA_LIFETIMEBOUND {
    ROSETTA_CHECK(i < modules_.size(), "module list: index ", i, " out of range for ",
                  modules_.size(), " modules");
    return modules_[i];
  }
  const std::shared_ptr<T>& operator[](size_t i) const { return at(i); }
  // Module i as a U; throws when it is not one.
  template <class U>
  std::shared_ptr<U> ptr(size_t i) const {
    std::shared_ptr<U> p = std::dynamic_pointer_cast<U>(at(i));
    ROSETTA_CHECK(p != nullptr, "module list: module ", i, " is not of the requested type");
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<T>> modules_;
};

using ModuleList = ModuleListOf<Module>;

// forward(x) = m_{n-1}(... m_1(m_0(x))); the identity when empty.
class Sequential : public ModuleListOf<UnaryModule, UnaryModule> {
 public:
  using ModuleListOf::ModuleListOf;
  Var forward(const Var& x) const override {
    Var y = x;
    for (const auto& m : *this) y = m->forward(y);
    return y;
  }
};

}  // namespace rosetta::nn
