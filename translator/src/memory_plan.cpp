#include "rosetta/translator/memory_plan.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "rosetta/core/cpu.h"
#include "rosetta/core/ops.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

using train::format_size;
using train::MemoryBudget;
using train::MemoryPlan;

namespace {

constexpr double kFloat = 4;  // bytes

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

int64_t parameter_count(const nn::TransformerOptions& o) {
  const int64_t D = o.d_model(), F = o.ff();
  const int64_t attention = 4 * (D * D + D);  // q, k, v and output projections, with biases
  const int64_t feed_forward = 2 * D * F + F + D;
  const int64_t norm = 2 * D;
  const int64_t encoder = o.encoder_layers() * (attention + feed_forward + 2 * norm) + norm;
  const int64_t decoder = o.decoder_layers() * (2 * attention + feed_forward + 3 * norm) + norm;
  const int64_t embeddings = (o.share_embeddings() ? o.src_vocab() : o.src_vocab() + o.tgt_vocab()) * D;
  const int64_t output = (o.tie_output() ? 0 : D * o.tgt_vocab()) + o.tgt_vocab();  // bias either way
  return encoder + decoder + embeddings + output;
}

// Floats kept per token position of the batch, with D model width, F feed-forward width, H heads,
// L sequence length, V target vocabulary, Le/Ld encoder/decoder layers:
//   D (8 + 8 Le + 12 Ld) + F (2 Le + 2 Ld) + 2 H L (Le + 2 Ld) + 16 (Le + Ld) + 1.1 V
// (relu; gelu: 3 F), i.e. per layer the tensors autograd saves for backward (layer-norm
// outputs, q, k, v, the attention probabilities, before and after dropout, per attention block:
// one in an encoder layer, two in a decoder layer; the feed-forward hidden layer; per-position
// statistics) and, once, the logits (their gradient is computed in place) and the gradients
// live at the peak of the backward pass.
// The coefficients were fitted to the allocator's peak over a forward and backward pass of
// the whole batch (what `rosetta train` logs as "largest batch's activations") on 29 shapes,
// D 64-1024, F 256-2048, H 4-8, L 32-256, V 100-16000, 1-3 layers, relu and gelu, and rounded
// up: the estimate is 1.0-1.25x the measured peak on all of them (e.g. the default translator
// on 9 sentences of 256 tokens: 337 MiB estimated, 333 MiB measured). Real sentences, shorter
// than --max-len, hold less: the default translator's largest batch of data/de-en/train.tsv
// measured 225-235 MiB, where the plan (for 2,500 tokens of 256-token sequences) says 365 MiB.
double training_activation_bytes(const nn::TransformerOptions& o, int64_t max_tokens) {
  const double D = double(o.d_model()), F = double(o.ff()), H = double(o.heads());
  const double Le = double(o.encoder_layers()), Ld = double(o.decoder_layers()), V = double(o.tgt_vocab());
  const double L = double(std::min<int64_t>(o.max_len(), max_tokens));
  const double ff = o.activation() == nn::Activation::gelu ? 3 : 2;
  const double per_token =
      D * (8 + 8 * Le + 12 * Ld) + F * ff * (Le + Ld) + 2 * H * L * (Le + 2 * Ld) + 16 * (Le + Ld) + 1.1 * V;
  return kFloat * double(max_tokens) * per_token;
}

// Against a whole run: the default translator on data/de-en (20 updates and a validation)
// peaked at 501 MiB resident on 1 thread and 660 MiB on 2 (2 replicas), where the plan says
// 536 and 555 MiB; the rest is the allocator's cache of blocks of other sizes, the runtime and
// the corpus.
MemoryPlan training_plan(const TrainConfig& c, int replicas, int ranks) {
  const int64_t vocab = c.task == Task::copy ? c.copy_symbols + 4 : c.vocab_size;
  const nn::TransformerOptions o = c.model_options(vocab, vocab);
  const double weights = kFloat * double(parameter_count(o));
  const double optimizer_tensors = c.optimizer == OptimizerKind::sgd ? (c.momentum > 0 ? 1 : 0) : 2;
  const double ema = c.ema > 0 ? weights : 0;
  MemoryPlan plan;
  plan.what = ranks > 1 ? "this run (" + std::to_string(ranks) + " ranks on this machine)" : "this run";
  plan.parts = {{"weights", weights + kFloat * double(c.model.max_len() * c.model.d_model())},  // + the positional table
                {"gradients", weights},
                {"optimizer state", optimizer_tensors * weights},
                {"EMA", ema},
                {"replicas' gradients", double(replicas - 1) * weights},
                // bf16 (auto may be): each weight packed as bf16 twice (x w^T and dy w), shared by
                // the replicas (core SharedPackedWeights)
                {"weights packed for bf16 products", c.precision == PrecisionChoice::fp32 ? 0.0 : weights},
                {"largest batch's activations", training_activation_bytes(o, c.max_tokens)},
                // serialized whole before it is written (core/safetensors), while the freed
                // activations stay in the allocator's cache
                {"checkpoint being written", (1 + optimizer_tensors) * weights + ema}};
  for (auto& part : plan.parts) part.second *= ranks;
  std::ostringstream d;
  d << "the sizes follow --d-model " << c.model.d_model() << " --ff " << c.model.ff() << " --heads " << c.model.heads() << " --encoder-layers "
    << c.model.encoder_layers() << " --decoder-layers " << c.model.decoder_layers()
    << (c.task == Task::copy ? " --copy-symbols " + std::to_string(c.copy_symbols)
                         : " --vocab-size " + std::to_string(c.vocab_size))
    << " --max-tokens " << c.max_tokens << " --max-len " << c.model.max_len() << " --optimizer " << optimizer_kind_name(c.optimizer);
  if (c.ema > 0) d << " --ema " << number(c.ema);
  if (replicas > 1) d << " --replicas " << replicas;
  d << ": choose smaller values";
  plan.drivers = d.str();
  return plan;
}

// Decoding keeps, per decoder layer, the keys and values of every beam's target positions
// ([rows x beam, T, D] each at most, T the target length limit; beams share their prefixes'
// rows) and of the sources ([rows, S, D] each, shared by a sentence's beams); a cache that
// grows is copied once into one up to twice its size. A step's logits and their log-softmax
// are [rows x beam, V]. Encoding the batch comes first, without gradients; its blocks stay in
// the allocator's cache. The plan bounds the allocator's peak from above, within 2x of it
// (tests/apps/test_faults.cpp: "the decoding estimate bounds the measured peak of a batch").
MemoryPlan decoding_plan(const nn::TransformerOptions& o, int64_t rows, int64_t src_len,
                         const nn::SearchOptions& search, int64_t batch_tokens, int decoders) {
  const double D = double(o.d_model()), F = double(o.ff()), H = double(o.heads()), V = double(o.tgt_vocab());
  const double S = double(src_len), R = double(rows * search.beam());
  const double T = double(std::min<int64_t>(int64_t(search.max_len_a() * S) + search.max_len_b(), o.max_len() - 1) + 1);
  const double caches = kFloat * 2 * double(o.decoder_layers()) * (R * T + double(rows) * S) * D;
  const double n = double(std::max(decoders, 1)), params = double(parameter_count(o));
  MemoryPlan plan;
  plan.what = "translating the largest batch";
  if (decoders > 1) plan.what += " on each of " + std::to_string(decoders) + " threads at once";
  plan.parts = {{"weights", kFloat * (params + double(o.max_len()) * D)},
                {"encoder", n * kFloat * double(rows) * S * (8 * D + 2 * F + 2 * H * S)},
                {"beams' keys and values", n * (caches + kFloat * R * T * D)},
                {"a step", n * kFloat * R * (3 * V + 2 * F + 8 * D + 2 * H * (T + S))}};
  // Products by weights pack them once per decoding thread: fp32 on AVX-512 or AVX2 4 bytes a
  // weight, bf16 2, int8 1 (and its column's scale); fp32 elsewhere runs on OpenBLAS, unpacked.
  const Precision p = matmul_precision();
  const double packed = p == Precision::bf16                              ? 2.0
                        : p == Precision::int8                            ? 1.0
                        : !PackedWeightsScope::fp32_kernel_isa().empty() ? 4.0
                                                                          : 0.0;
  if (packed > 0) plan.parts.emplace_back("packed weights", n * params * packed);
  std::ostringstream d;
  d << "the sizes follow --batch-tokens " << batch_tokens << " (" << rows << " sentences of up to " << src_len
    << " tokens; " << kMaxBatchRows << " at most) --beam " << search.beam() << " --max-len-a " << number(search.max_len_a())
    << " --max-len-b " << search.max_len_b() << " and the model (d_model " << o.d_model() << ", decoder layers "
    << o.decoder_layers() << ", vocabulary " << o.tgt_vocab()
    << (decoders > 1 ? "), " + std::to_string(decoders) + " batches at once (one per thread" : "")
    << "): choose a smaller --batch-tokens or --beam" << (decoders > 1 ? ", or fewer --threads" : "");
  plan.drivers = d.str();
  return plan;
}

std::function<void(int64_t, int64_t, int)> decoding_check(const MemoryBudget& budget,
                                                      const nn::TransformerOptions& model_options,
                                                      const nn::SearchOptions& search, int64_t batch_tokens) {
  return [&budget, model_options, search, batch_tokens](int64_t rows, int64_t src_len, int decoders) {
    budget.check(decoding_plan(model_options, rows, src_len, search, batch_tokens, decoders));
  };
}

}  // namespace rosetta::translator
