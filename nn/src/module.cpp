#include "rosetta/nn/module.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_set>

#include "rosetta/core/safetensors.h"

namespace rosetta::nn {

void Module::check_name(const std::string& name) const {
  ROSETTA_CHECK(!name.empty() && name.find('.') == std::string::npos,
                "Module: invalid name '", name,
                "' (non-empty, no dots; numbered children such as blocks.0 go in a ModuleList)");
  for (const auto& [n, _] : params_) ROSETTA_CHECK(n != name, "Module: '", name, "' registered twice");
  for (const auto& b : buffers_) ROSETTA_CHECK(b.name != name, "Module: '", name, "' registered twice");
  for (const auto& [n, _] : children_) ROSETTA_CHECK(n != name, "Module: '", name, "' registered twice");
}

Var Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_name(name);
  Var v(std::move(value), requires_grad);
  params_.emplace_back(name, v);
  return v;
}

Var Module::register_parameter(const std::string& name, const Var& shared) {
  check_name(name);
  params_.emplace_back(name, shared);
  return shared;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_name(name);
  buffers_.push_back({name, value, persistent});
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name);
  ROSETTA_CHECK(module != nullptr, "Module: child '", name, "' is null");
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Var>>& params,
                     NamedTensors* buffers) const {
  for (const auto& [n, v] : params_) params.emplace_back(prefix + n, v);
  if (buffers)
    for (const auto& b : buffers_)
      if (b.persistent) buffers->emplace_back(prefix + b.name, b.value);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", params, buffers);
}

std::vector<std::pair<std::string, Var>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Var>> all, unique;
  collect("", all, nullptr);
  std::unordered_set<const AutogradMeta*> seen;
  for (auto& p : all)
    if (seen.insert(p.second.meta().get()).second) unique.push_back(std::move(p));
  return unique;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& [_, v] : named_parameters()) out.push_back(v);
  return out;
}

NamedTensors Module::named_buffers() const {
  std::vector<std::pair<std::string, Var>> params;
  NamedTensors buffers;
  collect("", params, &buffers);
  return buffers;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const auto& [_, v] : named_parameters()) n += v.numel();
  return n;
}

std::vector<const Module*> Module::modules() const {
  std::vector<const Module*> out;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    if (std::find(out.begin(), out.end(), &m) != out.end()) return;  // shared by two parents
    out.push_back(&m);
    for (const auto& [_, child] : m.children_) visit(*child);
  };
  visit(*this);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, m] : children_) m->train(on);
}

void Module::zero_grad() {
  for (const auto& [_, v] : named_parameters()) v.zero_grad();
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (const auto& [n, v] : named_parameters()) out.emplace_back(n, v.data());
  for (auto& b : named_buffers()) out.push_back(std::move(b));
  return out;
}

void Module::load_state_dict(const NamedTensors& state) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  std::vector<std::string> problems;
  std::set<std::string> used;
  NamedTensors mine = state_dict();
  for (const auto& [name, dst] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      problems.push_back("missing " + name);
      continue;
    }
    used.insert(name);
    const Tensor& src = *it->second;
    if (src.shape() != dst.shape())
      problems.push_back(name + " has shape " + src.shape().str() + ", expected " +
                         dst.shape().str());
    else if (src.dtype() != dst.dtype())
      problems.push_back(name + " has dtype " + dtype_name(src.dtype()) + ", expected " +
                         dtype_name(dst.dtype()));
  }
  for (const auto& [n, _] : given)
    if (!used.count(n)) problems.push_back("unexpected " + n);
  if (!problems.empty()) {
    std::string msg = "state dict does not match the model (" + std::to_string(problems.size()) +
                      " problem" + (problems.size() > 1 ? "s" : "") + "): ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    ROSETTA_FAIL(msg);
  }
  for (auto& [name, dst] : mine) {
    Tensor d = dst;
    d.copy_(*given[name]);
  }
}

void Module::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  save_safetensors(path, state_dict(), metadata);
}

std::map<std::string, std::string> Module::load(const std::string& path) {
  SafeTensors st = load_safetensors(path);
  try {
    load_state_dict(st.tensors);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  return st.metadata;
}

}  // namespace rosetta::nn
