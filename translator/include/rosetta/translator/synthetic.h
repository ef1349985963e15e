// A Transformer's training step on a fixed batch of random tokens, for timing: what `rosetta
// bench` measures, and what `--recipe auto` times to estimate the updates a --max-time gives.
//
//   translator::SyntheticTraining t(options, adam, {rows, src_len, tgt_len}, 0);
//   t.step();                             // warm-up
//   const double seconds = time(t.step);  // the step of rosetta train, without clipping
#pragma once

#include <cstdint>
#include <memory>

#include "rosetta/nn/transformer.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/replicas.h"
#include "rosetta/train/trainer.h"

namespace rosetta::translator {

struct SyntheticBatch {
  int64_t rows = 0, src_len = 0, tgt_len = 0;
};

class SyntheticTraining {
 public:
  // The model of `options` (weights from seed 0), Adam with `adam`, the thread plan for
  // `replicas` (0: ThreadReplicas::plan's choice for the batch's target tokens) on this
  // process's threads, and one batch of tokens drawn uniformly from [1, vocabulary).
  SyntheticTraining(const nn::TransformerOptions& options, const optim::AdamOptions& adam,
                    const SyntheticBatch& batch, int replicas);
  ~SyntheticTraining();
  SyntheticTraining(const SyntheticTraining&) = delete;
  SyntheticTraining& operator=(const SyntheticTraining&) = delete;

  // One update on the batch (a shard per replica; label smoothing 0.1, no clipping).
  train::StepResult step();
  const nn::Transformer& model() const;
  const train::ThreadPlan& plan() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace rosetta::translator
