// Basic layers. Dimension legend: B batch, T time (sequence), D model width, F feed-forward
// width, V vocabulary.
#pragma once

#include <memory>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/enum_names.h"
#include "rosetta/core/lifetime.h"
#include "rosetta/nn/module.h"

namespace rosetta::nn {

// Weight initialisers (all draw from the caller's generator).
// Glorot/Xavier uniform for a [fan_out, fan_in] matrix: U(-a, a), a = sqrt(6 / (in + out)).
Tensor xavier_uniform(Generator& gen, int64_t fan_out, int64_t fan_in);

struct LinearOptions {
  LinearOptions(int64_t in, int64_t out) : in_features_(in), out_features_(out) {}
  ROSETTA_ARG(int64_t, in_features);
  ROSETTA_ARG(int64_t, out_features);
  ROSETTA_ARG(bool, bias) = true;
};

// y = x W^T + b; weight [out, in] (Xavier uniform), bias [out] (zeros).
class Linear : public UnaryModule {
 public:
  Linear(const LinearOptions& options, Generator& gen);
  Var forward(const Var& x) const override { return linear(x, weight, bias); }
  Var weight;  // [out, in]
  Var bias;    // [out], undefined without bias
  const LinearOptions options;
};

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num, int64_t dim) : num_embeddings_(num), dim_(dim) {}
  ROSETTA_ARG(int64_t, num_embeddings);
  ROSETTA_ARG(int64_t, dim);
  ROSETTA_ARG(int32_t, padding_idx) = -1;  // this row gets no gradient; -1 for none
  ROSETTA_ARG(double, init_std) = -1;      // N(0, std); -1 means dim^-1/2
};

// ids [B, T] (I32) -> [B, T, D]; weight [V, D].
class Embedding : public Module {
 public:
  Embedding(const EmbeddingOptions& options, Generator& gen);
  Var forward(const Tensor& ids) const { return embedding(weight, ids, options.padding_idx()); }
  Var weight;
  const EmbeddingOptions options;
};

// PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)); a buffer
// [max_len, D] computed in double and rounded to float.
class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(int64_t dim, int64_t max_len);
  // Rows [start, start + length) of the table: [length, D].
  Tensor rows(int64_t start, int64_t length) const;
  int64_t max_len() const { return pe_.shape()[0]; }

 private:
  Tensor pe_;
};

// Inverted dropout driven by a shared generator; identity in eval mode.
class Dropout : public UnaryModule {
 public:
  Dropout(double p, std::shared_ptr<Generator> gen);
  Var forward(const Var& x) const override { return dropout(x, p_, *gen_, is_training()); }
  double p() const { return p_; }
  Generator& generator() const ROSETTA_LIFETIMEBOUND { return *gen_; }

 private:
  double p_;
  std::shared_ptr<Generator> gen_;
};

// Over the last axis: weight [D] (ones), bias [D] (zeros).
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Var forward(const Var& x) const override { return layer_norm(x, weight, bias, eps_); }
  Var weight, bias;

 private:
  double eps_;
};

enum class Activation { relu, gelu };
constexpr EnumNames<Activation, 2> enum_names(Activation) {
  return {"activation", {{{Activation::relu, "relu"}, {Activation::gelu, "gelu"}}}};
}
// "relu" | "gelu"; throws naming the value otherwise.
inline Activation parse_activation(const std::string& name) { return parse_enum<Activation>(name); }
inline const char* activation_name(Activation a) { return enum_name(a); }

// The activations as modules without parameters, for Sequential.
class ReLU : public UnaryModule {
 public:
  Var forward(const Var& x) const override { return relu(x); }
};

class GELU : public UnaryModule {  // exact (erf) form
 public:
  Var forward(const Var& x) const override { return gelu(x); }
};

// x [B, T, D] -> linear2(dropout(act(linear1(x)))), with linear1: D -> F, linear2: F -> D.
class FeedForward : public UnaryModule {
 public:
  FeedForward(int64_t dim, int64_t ff_dim, Activation act, double dropout,
              std::shared_ptr<Generator> dropout_gen, Generator& init_gen);
  Var forward(const Var& x) const override;
  std::shared_ptr<Linear> linear1, linear2;

 private:
  Activation act_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace rosetta::nn
