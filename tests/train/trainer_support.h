// The fixtures of the training layer's tests (test_trainer.cpp, test_run_files.cpp): a user's
// model that is not a Transformer, and a fresh temporary directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "rosetta/nn/nn.h"

namespace {

using namespace rosetta;
namespace fs = std::filesystem;

// A user's model: no Transformer, its own dropout, its layers in a Sequential.
class Mlp : public nn::Module {
 public:
  Mlp(Generator& g, uint64_t dropout_seed)
      : net(register_module("net", std::make_shared<nn::Sequential>(
                                       std::make_shared<nn::Linear>(nn::LinearOptions(6, 12), g),
                                       std::make_shared<nn::ReLU>(),
                                       std::make_shared<nn::Dropout>(0.25, std::make_shared<Generator>(dropout_seed)),
                                       std::make_shared<nn::Linear>(nn::LinearOptions(12, 5), g)))) {}
  Var forward(const Var& x) const { return net->forward(x); }
  std::shared_ptr<nn::Sequential> net;
};

inline std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rosetta-test-train-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace
