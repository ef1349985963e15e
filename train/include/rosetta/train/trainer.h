// The training step as a library: any nn::Module, trained on thread replicas and (optionally)
// across the processes of an MPI job, with token-weighted losses, gradient clipping, a policy
// for non-finite values, a learning-rate schedule and a moving average of the weights.
//
//   auto model = std::make_shared<MyModel>(...);
//   optim::Adam opt(model->parameters(), adam_options);
//   train::Trainer trainer(*model, opt, train::TrainerOptions().replicas(2).clip(1.0),
//                          [] { return std::make_unique<MyModel>(...); });
//   for (...) {
//     const auto r = trainer.step({batch_rows}, batch_tokens, [&](nn::Module& m, size_t, int64_t b0, int64_t b1) {
//       auto& replica = static_cast<MyModel&>(m);
//       return train::ShardLoss{cross_entropy(replica.forward(x.narrow(0, b0, b1 - b0)), ...), tokens};
//     });
//   }
//   double valid = trainer.evaluate({valid_rows}, valid_tokens, same_kind_of_loss);
//
// An update is computed as one process computing the whole batch would, up to the order of
// float summation: each shard's mean loss is weighted by its share of the update's tokens.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/lifetime.h"
#include "rosetta/nn/module.h"
#include "rosetta/optim/optimizer.h"
#include "rosetta/optim/schedule.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/replicas.h"

namespace rosetta::train {

struct TrainerOptions {
  // Thread replicas of the model, each training a shard of every batch (1: none; see
  // ThreadReplicas::plan for a choice by size).
  ROSETTA_ARG(int, replicas) = 1;
  // Threads in each replica's large bf16 products (ThreadPlan::inner_threads).
  ROSETTA_ARG(int, replica_threads) = 1;
  // Global gradient-norm clip (0: off; the norm is still measured).
  ROSETTA_ARG(double, clip) = 1.0;
  // A non-finite loss or gradient: true throws NonFiniteError, false skips the update (and
  // throws after `max_skipped` skipped in a row).
  ROSETTA_ARG(bool, stop_on_nonfinite) = false;
  ROSETTA_ARG(int64_t, max_skipped) = 100;
  // Decay of an exponential moving average of the weights (0: none), see Trainer::ema().
  ROSETTA_ARG(double, ema) = 0.0;
};

// Thrown for a non-finite loss or gradient under stop_on_nonfinite, or after max_skipped
// skipped updates in a row. The model and optimizer hold the weights of the last good update.
struct NonFiniteError : Error {
  using Error::Error;
};

// A shard's loss: the mean over its `tokens` tokens (the trainer weights it by their share).
struct ShardLoss {
  Var loss;
  int64_t tokens = 0;
};

// What one update did.
struct StepResult {
  double loss = 0;         // mean loss over the update's tokens (all ranks)
  int64_t tokens = 0;      // the update's tokens (all ranks), as given
  double grad_norm = 0;    // before clipping
  bool skipped = false;    // non-finite: no update was made
  double allreduce_s = 0;  // in the gradient allreduce (several ranks), waiting included
};

class Trainer {
 public:
  // loss(replica, batch, begin, end): the loss of rows [begin, end) of this rank's batch
  // `batch`, computed by `replica` (the model or one of its replicas; cast it to the model's
  // type). Called on the replicas' threads at once: it must only read shared state.
  using LossFn = std::function<ShardLoss(nn::Module& replica, size_t batch, int64_t begin, int64_t end)>;

  // Trains `model` with `opt` (built on model.parameters()); `make_replica` builds the other
  // replicas (unused with one). `schedule`, when given, sets the learning rate before every
  // update (lr(step + 1)). `group` is the process group (one process by default); its ranks
  // start from the root's weights.
  Trainer(nn::Module& model, optim::Optimizer& opt, TrainerOptions options = {},
          ThreadReplicas::Factory make_replica = {}, std::shared_ptr<const optim::Schedule> schedule = {},
          ProcessGroup group = {});

  // One update from this rank's `rows.size()` batches of rows[b] rows each, whose tokens over
  // all ranks are `total_tokens`. Sums the shards' gradients over replicas, batches and ranks,
  // clips, applies the non-finite policy, steps the optimizer and schedule.
  StepResult step(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss);

  // Validation: the mean loss over the tokens of this rank's `rows.size()` batches, whose tokens
  // over all ranks are `total_tokens`, computed as step() computes it (shards on the replicas,
  // summed over the ranks) but without gradients, with the model in eval mode (no dropout), and
  // without changing anything. Call it on every rank of a job.
  double evaluate(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss);

  int64_t steps() const { return steps_; }      // updates made
  int64_t skipped() const { return skipped_; }  // updates skipped for non-finite values
  nn::Module& model() const { return model_; }
  optim::Optimizer& optimizer() const { return opt_; }
  const ProcessGroup& group() const ROSETTA_LIFETIMEBOUND { return group_; }
  const TrainerOptions& options() const ROSETTA_LIFETIMEBOUND { return options_; }
  int replicas() const { return replicas_.size(); }
  // The moving average of the weights in the optimizer's flat layout (undefined without one).
  const Tensor& ema() const ROSETTA_LIFETIMEBOUND { return ema_; }
  // The model's dropout generators (their state is part of a checkpoint).
  const std::vector<Generator*>& generators() const { return generators_; }

  // Progress restored from a checkpoint (train/checkpoint.h).
  void restore_progress(int64_t steps, int64_t skipped);

  // Before a checkpoint under several ranks: the root collects every rank's dropout position
  // (rank_dropout_counters), and every rank's parameters are compared with the root's (they
  // should be identical); a rank that differs adopts the root's. Returns the largest difference.
  float synchronize();
  // On the root after synchronize(): each rank's dropout generators' counters, space-separated,
  // in rank order (empty with one process).
  const std::vector<std::string>& rank_dropout_counters() const ROSETTA_LIFETIMEBOUND { return rank_counters_; }

 private:
  // The sum over `rows`' batches of every shard's loss weighted by its share of `total_tokens`,
  // the shards run on the replicas; with `backward`, each weighted loss is backpropagated into its
  // replica's gradients, else computed without gradients.
  double run_shards(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss, bool backward);

  nn::Module& model_;
  optim::Optimizer& opt_;
  TrainerOptions options_;
  std::shared_ptr<const optim::Schedule> schedule_;
  ProcessGroup group_;
  ThreadReplicas replicas_;
  std::vector<Generator*> generators_;
  std::vector<std::string> rank_counters_;
  Tensor ema_;
  int64_t steps_ = 0, skipped_ = 0, skipped_in_a_row_ = 0;
};

// While alive, the trainer's model holds the moving average of its weights (when there is
// one); then the trained weights come back, bit for bit.
class EmaWeights {
 public:
  explicit EmaWeights(const Trainer& trainer);
  ~EmaWeights();
  EmaWeights(const EmaWeights&) = delete;
  EmaWeights& operator=(const EmaWeights&) = delete;

 private:
  Tensor flat_, saved_;
};

// Rank r's dropout stream: rank 0 keeps the model's seed (so a job of one process is the
// single-process run, and checkpoints hold rank 0's seed); the others derive theirs from it.
uint64_t rank_seed(uint64_t seed, int rank);

}  // namespace rosetta::train
