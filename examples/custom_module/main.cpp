// A user-defined module built from rosetta's layers: attention pooling with a learned query.
//
// Task: does a sequence of T tokens (vocabulary V) contain the needle token? The module embeds
// the tokens, normalises them, lets its own learned query attend over them and classifies the
// pooled vector. After a few training steps it is saved as a safetensors checkpoint (with
// metadata), loaded into a fresh instance, and the two must give the same outputs.
//
// Dimension legend: B batch, T sequence length, D width, V vocabulary, C classes.
#include <rosetta/rosetta.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

using namespace rosetta;

class AttentionPool : public nn::Module {
 public:
  AttentionPool(int64_t vocab, int64_t dim, int64_t heads, int64_t classes, Generator& gen)
      : query(register_parameter("query", gen.normal({1, 1, dim}, 0.0, 0.02))),  // [1, 1, D]
        embed(register_module(
            "embed", std::make_shared<nn::Embedding>(nn::EmbeddingOptions(vocab, dim), gen))),
        norm(register_module("norm", std::make_shared<nn::LayerNorm>(dim))),
        attn(register_module("attn", std::make_shared<nn::MultiHeadAttention>(
                                         dim, heads, /*dropout=*/0.0,
                                         std::make_shared<Generator>(1), gen))),
        head(register_module("head", std::make_shared<nn::Linear>(
                                         nn::LinearOptions(dim, classes), gen))) {}

  // ids [B, T] (I32) -> logits [B, C]
  Var forward(const Tensor& ids) const {
    const int64_t B = ids.size(0), D = query.size(-1);
    Var x = norm->forward(embed->forward(ids));                 // [B, T, D]
    Var q = expand(query, {B, 1, D});                           // [B, 1, D]
    Var pooled = attn->forward(q, x, /*mask=*/Tensor());        // [B, 1, D]
    return head->forward(reshape(pooled, {B, D}));              // [B, C]
  }

  Var query;
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::Linear> head;
};

constexpr int64_t kVocab = 10, kLen = 8, kDim = 32, kHeads = 4;
constexpr int32_t kNeedle = 7;

// ids [n, T] and labels [n]: 1 when the needle occurs in the row.
std::pair<Tensor, Tensor> make_batch(Generator& gen, int64_t n) {
  Tensor ids = gen.randint({n, kLen}, 0, kVocab);
  std::vector<int32_t> v = ids.to_vector<int32_t>(), y(n, 0);
  for (int64_t i = 0; i < n * kLen; ++i) y[i / kLen] |= v[i] == kNeedle;
  return {ids, Tensor::from_vector(y)};
}

int main(int argc, char** argv) {
  // First: threads that wait passively, OpenBLAS's best kernels, rosetta's checked (rosetta/core/start.h).
  for (const std::string& w : start(argc, argv).warnings()) std::fprintf(stderr, "custom_module: warning: %s\n", w.c_str());
  Generator gen(1);
  AttentionPool model(kVocab, kDim, kHeads, /*classes=*/2, gen);
  for (const auto& [name, p] : model.named_parameters())
    std::printf("%-22s %s\n", name.c_str(), p.shape().str().c_str());

  auto opt = optim::make_adamw(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  double first = 0, last = 0;
  for (int step = 1; step <= 60; ++step) {
    auto [ids, y] = make_batch(gen, 64);
    Var loss = cross_entropy(model.forward(ids), y);
    opt->zero_grad();
    loss.backward();
    optim::clip_grad_norm(*opt, 1.0);
    opt->step();
    last = loss.item();
    if (step == 1) first = last;
    if (step % 20 == 0 || step == 1) std::printf("step %2d  loss %.4f\n", step, last);
  }

  // Save, then load into a fresh instance initialised from another seed.
  const std::string path =
      (std::filesystem::temp_directory_path() / "rosetta_attention_pool.safetensors").string();
  model.save(path, {{"task", "needle"}, {"dim", std::to_string(kDim)}});
  Generator other_gen(99);
  AttentionPool restored(kVocab, kDim, kHeads, 2, other_gen);
  std::map<std::string, std::string> meta = restored.load(path);
  std::filesystem::remove(path);

  NoGradGuard no_grad;
  model.eval();
  restored.eval();
  auto [ids, y] = make_batch(gen, 16);
  std::vector<float> a = model.forward(ids).data().to_vector<float>();
  std::vector<float> b = restored.forward(ids).data().to_vector<float>();
  const bool same = a == b;  // the same weights and kernels give bit-identical outputs
  std::printf("metadata task=%s dim=%s; outputs %s\n", meta["task"].c_str(), meta["dim"].c_str(),
              same ? "match" : "DIFFER");
  return same && meta["task"] == "needle" && last < first ? 0 : 1;
}
