#include "rosetta/nn/layers.h"

#include <cmath>

namespace rosetta::nn {

Tensor xavier_uniform(Generator& gen, int64_t fan_out, int64_t fan_in) {
  const double a = std::sqrt(6.0 / double(fan_in + fan_out));
  return gen.uniform({fan_out, fan_in}, -a, a);
}

Linear::Linear(const LinearOptions& o, Generator& gen) : options(o) {
  ROSETTA_CHECK(o.in_features() > 0 && o.out_features() > 0, "Linear: sizes must be positive, got ",
                o.in_features(), " -> ", o.out_features());
  weight = register_parameter("weight", xavier_uniform(gen, o.out_features(), o.in_features()));
  if (o.bias()) bias = register_parameter("bias", Tensor::zeros({o.out_features()}));
}

Embedding::Embedding(const EmbeddingOptions& o, Generator& gen) : options(o) {
  ROSETTA_CHECK(o.num_embeddings() > 0 && o.dim() > 0, "Embedding: sizes must be positive, got ",
                o.num_embeddings(), " x ", o.dim());
  ROSETTA_CHECK(o.padding_idx() >= -1 && o.padding_idx() < o.num_embeddings(),
                "Embedding: padding_idx ", o.padding_idx(), " outside [0, ", o.num_embeddings(), ")");
  const double std = o.init_std() > 0 ? o.init_std() : 1.0 / std::sqrt(double(o.dim()));
  Tensor w = gen.normal({o.num_embeddings(), o.dim()}, 0.0, std);
  if (o.padding_idx() >= 0) w.select(0, o.padding_idx()).zero_();
  weight = register_parameter("weight", w);
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t dim, int64_t max_len) {
  ROSETTA_CHECK(dim > 0 && max_len > 0, "SinusoidalPositionalEncoding: sizes must be positive");
  std::vector<float> pe(size_t(max_len * dim));
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t i = 0; i < dim; i += 2) {
      const double angle = double(pos) * std::exp(-double(i) * std::log(10000.0) / double(dim));
      pe[pos * dim + i] = float(std::sin(angle));
      if (i + 1 < dim) pe[pos * dim + i + 1] = float(std::cos(angle));
    }
  pe_ = register_buffer("pe", Tensor::from_vector(pe, {max_len, dim}), /*persistent=*/false);
}

Tensor SinusoidalPositionalEncoding::rows(int64_t start, int64_t length) const {
  ROSETTA_CHECK(start >= 0 && start + length <= max_len(), "positional encoding: positions [",
                start, ", ", start + length, ") exceed the maximum length ", max_len());
  return pe_.narrow(0, start, length);
}

Dropout::Dropout(double p, std::shared_ptr<Generator> gen) : p_(p), gen_(std::move(gen)) {
  ROSETTA_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability ", p, " outside [0, 1)");
  ROSETTA_CHECK(gen_ != nullptr, "Dropout: needs a generator");
}

LayerNorm::LayerNorm(int64_t dim, double eps) : eps_(eps) {
  ROSETTA_CHECK(dim > 0, "LayerNorm: size must be positive, got ", dim);
  weight = register_parameter("weight", Tensor::ones({dim}));
  bias = register_parameter("bias", Tensor::zeros({dim}));
}

FeedForward::FeedForward(int64_t dim, int64_t ff_dim, Activation act, double p,
                         std::shared_ptr<Generator> dropout_gen, Generator& init_gen)
    : act_(act) {
  linear1 = register_module("linear1", std::make_shared<Linear>(LinearOptions(dim, ff_dim), init_gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(LinearOptions(ff_dim, dim), init_gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
}

Var FeedForward::forward(const Var& x) const {
  // relu, dropout and linear2 as one op keep one [B, T, F] activation for the backward pass, not
  // two, and take relu's gradient as linear2's input gradient is stored; with linear1 too, the
  // activation is written (in bf16) as linear1's product is stored.
  if (act_ == Activation::relu)
    return linear_relu_dropout_linear(x, linear1->weight, linear1->bias, dropout_->p(), dropout_->generator(),
                                      dropout_->is_training(), linear2->weight, linear2->bias);
  return linear2->forward(dropout_->forward(gelu(linear1->forward(x))));
}

}  // namespace rosetta::nn
