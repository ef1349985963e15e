// What scripts/lint.sh must catch, and what it must let through: each line marked `dangles`
// keeps a reference or pointer into a temporary past its statement, and clang must warn there
// (the getters are ROSETTA_LIFETIMEBOUND, rosetta/core/lifetime.h); the lines after them were
// such mistakes before the API changed, and are now correct. Parsed by the lint only, never built.
#include "rosetta/autograd/var.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/core/tensor.h"
#include "rosetta/data/batch.h"
#include "rosetta/nn/layers.h"
#include "rosetta/train/checkpoint.h"

using namespace rosetta;

float dangling() {
  const Shape& shape = Tensor::zeros({2, 3}).shape();                // dangles
  const float* p = Tensor::zeros({2, 3}).contiguous().data<float>();  // dangles
  const Tensor* found = load_safetensors("x").find("w");              // dangles
  const Tensor& data = Var(Tensor::zeros({2})).data();               // dangles
  for (int64_t d : Tensor::zeros({4}).shape()) p += d;               // dangles
  return float(shape[0]) + p[0] + float(found->numel()) + float(data.numel());
}

float fine(train::Trainer& trainer) {
  // Setters on a temporary return the options by value: the reference extends its life.
  const auto& batches = data::BatchOptions().max_tokens(64).seed(3);
  const auto& linear = nn::LinearOptions(4, 2).bias(false);
  // The metadata is returned by value (it was a reference into the temporary SafeTensors).
  const auto& meta = train::load_training_checkpoint(load_safetensors("c.safetensors"), "c.safetensors", trainer);
  const Tensor kept = Tensor::zeros({2, 3}).contiguous();
  return float(batches.seed_) + float(linear.bias()) + float(meta.size()) + kept.data<float>()[0];
}
