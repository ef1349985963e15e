// CharLM: a GPT-style byte-level language model built from rosetta's layers, as a user of the
// installed package writes it. Shared by the programs that train it (a bare loop in main.cpp);
// its LibTorch twin is bench/charlm_torch.cpp, which must stay the same architecture.
//
// Dimension legend: B batch, T context (T <= context()), D width, F feed-forward width,
// V vocabulary (256 bytes).
//
//   x = embed(ids) + pos[:T]                         [B, T, D]
//   per block:  x = x + attn(ln1(x), causal mask)
//               x = x + ff(ln2(x))                   (GELU, F = 4 D)
//   logits = head(ln_f(x))                           [B, T, V], head: D -> V without bias
#pragma once

// The model needs nn alone; the program that trains it, optim and train (main.cpp). Neither
// needs data, the translator or the report: the example links rosetta::train only.
#include <rosetta/nn/nn.h>

#include <memory>
#include <string>
#include <vector>

namespace charlm {

using rosetta::Generator;
using rosetta::Tensor;
using rosetta::Var;
namespace nn = rosetta::nn;

struct CharLMOptions {
  ROSETTA_ARG(int64_t, vocab) = 256;
  ROSETTA_ARG(int64_t, dim) = 128;
  ROSETTA_ARG(int64_t, heads) = 4;
  ROSETTA_ARG(int64_t, layers) = 4;
  ROSETTA_ARG(int64_t, context) = 64;
};

// A pre-norm decoder block without cross-attention.
class Block : public nn::Module {
 public:
  Block(const CharLMOptions& o, Generator& gen)
      : ln1(register_module("ln1", std::make_shared<nn::LayerNorm>(o.dim()))),
        attn(register_module("attn", std::make_shared<nn::MultiHeadAttention>(
                                         o.dim(), o.heads(), /*dropout=*/0.0,
                                         std::make_shared<Generator>(0), gen))),
        ln2(register_module("ln2", std::make_shared<nn::LayerNorm>(o.dim()))),
        ff(register_module("ff", std::make_shared<nn::FeedForward>(
                                     o.dim(), 4 * o.dim(), nn::Activation::gelu, /*dropout=*/0.0,
                                     std::make_shared<Generator>(0), gen))) {}

  // x [B, T, D], mask [1, 1, T, T] -> [B, T, D]
  Var forward(const Var& x, const Tensor& mask) const {
    const Var h = ln1->forward(x);
    const Var y = x + attn->forward(h, h, mask);
    return y + ff->forward(ln2->forward(y));
  }

  std::shared_ptr<nn::LayerNorm> ln1;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln2;
  std::shared_ptr<nn::FeedForward> ff;
};

class CharLM : public nn::Module {
 public:
  CharLM(const CharLMOptions& o, Generator& gen)
      : options(o),
        embed(register_module("embed", std::make_shared<nn::Embedding>(
                                           nn::EmbeddingOptions(o.vocab(), o.dim()).init_std(0.02),
                                           gen))),
        pos(register_parameter("pos", gen.normal({o.context(), o.dim()}, 0.0, 0.02))),
        blocks(register_module("blocks", std::make_shared<nn::ModuleListOf<Block>>())) {
    for (int64_t i = 0; i < o.layers(); ++i) blocks->push_back(std::make_shared<Block>(o, gen));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(o.dim()));
    head = register_module(
        "head", std::make_shared<nn::Linear>(nn::LinearOptions(o.dim(), o.vocab()).bias(false), gen));
  }

  // ids [B, T] (I32) -> logits [B, T, V]
  Var forward(const Tensor& ids) const {
    const int64_t T = ids.size(1);
    ROSETTA_CHECK(T <= options.context(), "CharLM: ", T, " tokens exceed the context ",
                  options.context());
    const Tensor mask = nn::causal_mask(T);
    Var x = embed->forward(ids) + rosetta::narrow(pos, 0, 0, T);
    for (const auto& block : *blocks) x = block->forward(x, mask);
    return head->forward(ln_f->forward(x));
  }

  const CharLMOptions options;
  std::shared_ptr<nn::Embedding> embed;
  Var pos;  // [context, D]
  std::shared_ptr<nn::ModuleListOf<Block>> blocks;  // blocks.0.attn.q_proj.weight, ...
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace charlm
