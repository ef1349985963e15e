// The memory plans of a translator: training it (`rosetta train`) and decoding with it
// (`translate`, `eval`), estimated from the options before anything big is allocated, for
// train::MemoryBudget to check (rosetta/train/resources.h).
#pragma once

#include <cstdint>
#include <functional>

#include "rosetta/nn/search.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/train/resources.h"
#include "rosetta/translator/config.h"

namespace rosetta::translator {

// The number of parameters of nn::Transformer(o), from its options alone.
int64_t parameter_count(const nn::TransformerOptions& o);

// Bytes of activations (and their gradients) of one forward and backward pass over a batch of
// `max_tokens` token positions per side, sequences as long as the model takes.
double training_activation_bytes(const nn::TransformerOptions& o, int64_t max_tokens);

// `rosetta train` with `c` on `replicas` model replicas, by each of `ranks` processes on this
// machine: weights, gradients, optimizer state, EMA, the replicas' gradients, the largest
// batch's activations and a checkpoint being written.
train::MemoryPlan training_plan(const TrainConfig& c, int replicas, int ranks);

// Translating with `model_options` a batch of `rows` sources of `src_len` tokens (`search` sets
// the beam and the target length limit) on each of `decoders` threads at once, once the model is
// loaded.
train::MemoryPlan decoding_plan(const nn::TransformerOptions& model_options, int64_t rows, int64_t src_len,
                                const nn::SearchOptions& search, int64_t batch_tokens, int decoders = 1);
// Translator::translate's batch check: refuses (throws) a batch whose decoding_plan exceeds `budget`.
// The budget is held by reference: it must outlive the check.
std::function<void(int64_t rows, int64_t src_len, int decoders)> decoding_check(const train::MemoryBudget& budget,
                                                                   const nn::TransformerOptions& model_options,
                                                                   const nn::SearchOptions& search,
                                                                   int64_t batch_tokens);

}  // namespace rosetta::translator
