// A Transformer's training step on a fixed batch of random tokens, for timing: what `rosetta
// bench` measures (bench_training, bench_decoding below), and what `--recipe auto` times to
// estimate the updates a --max-time gives.
//
//   translator::SyntheticTraining t(options, adam, {rows, src_len, tgt_len}, 0);
//   t.step();                             // warm-up
//   const double seconds = time(t.step);  // the step of rosetta train, without clipping
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// ------------------------------------------------------------------ rosetta bench

// A model and batch shape of bench/torch_reference.py's PRESETS: vocabulary, width, heads,
// feed-forward width, encoder and decoder layers, batch rows, source and target length.
struct BenchPreset {
  int64_t vocab, d, heads, ff, enc, dec, batch, src_len, tgt_len;
};
// "tiny", "small" or "base"; throws naming the others.
BenchPreset bench_preset(const std::string& name);

struct BenchOptions {
  std::string preset = "small";
  int steps = 20, warmup = 3;  // timed steps (the median is reported), untimed ones before
  int replicas = 0;            // 0: ThreadReplicas::plan picks
};

// The training step (SyntheticTraining) of the preset on this process's threads and matrix
// product precision: one JSON object (one line, no newline) with the median step time, tokens/s,
// peak memory, FLOPs, MFU against the GEMM roof of the precision, and the kernels.
std::string bench_training(const BenchOptions& options);
// Greedy and beam-4 decoding of one batch to the preset's target length without stopping at
// eos, the work torch_reference.py --decode does: one JSON object each.
std::vector<std::string> bench_decoding(const BenchOptions& options);

}  // namespace rosetta::translator
