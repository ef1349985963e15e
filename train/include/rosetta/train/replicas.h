// Data parallelism across the threads of one process, for any nn::Module.
//
// Small models leave the second core idle: their GEMMs are too small for two BLAS threads to
// pay off (a 512 x 64 x 64 product runs slower on two threads than on one here), and every
// parallel region costs a thread wake-up. Replicas split the batch instead: replica t runs
// shard t through forward and backward on thread t, with BLAS on one thread inside, and the
// replicas' gradients are summed into the optimizer's before its step, as MPI ranks do.
//
// Replica 0 is the model the optimizer was built on. The others are models of the same
// architecture, built by a factory, whose parameters are tied to its values (same storage: the
// optimizer's step updates all of them) and whose gradients live in flat buffers of their own,
// laid out as the optimizer's.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "rosetta/core/random.h"
#include "rosetta/nn/module.h"
#include "rosetta/optim/optimizer.h"

namespace rosetta::train {

// The distinct random generators of the nn::Dropout modules in `model`'s tree, in module order
// (a model whose dropouts share one generator has one).
std::vector<Generator*> dropout_generators(const nn::Module& model);

class ThreadReplicas {
 public:
  // A new model of the same architecture as the trained one (its weights and random state are
  // replaced by the model's).
  using Factory = std::function<std::unique_ptr<nn::Module>()>;

  // Replicas of `model`, whose parameters `opt` was built on: replica 0 is `model` itself, the
  // n-1 others come from `make` and are tied to the optimizer's values. The state of the model's
  // dropout generators is the one that counts (checkpoints save it); the replicas' are set from
  // it at every run(). `make` may be empty when n is 1.
  ThreadReplicas(nn::Module& model, const optim::Optimizer& opt, int n, const Factory& make);

  int size() const { return int(extra_.size()) + 1; }
  nn::Module& model(int r) const { return r == 0 ? model_ : *extra_[size_t(r - 1)]; }

  // Splits a batch of `rows` rows (sentences) into one shard per replica and runs
  // f(r, begin, end) for replica r on rows [begin, end), all at once, one thread each (BLAS
  // single-threaded inside). Each replica's dropout generators draw its shard's rows of what
  // the model's would draw for the whole batch, so the masks, and the summed gradients up to
  // rounding, are those of one model on the whole batch. Rethrows the first exception a
  // replica threw, after all have finished.
  void run(int64_t rows, const std::function<void(int, int64_t, int64_t)>& f);

  // Moves the gradients of replicas 1..n-1 into the optimizer's (replica 0's): adds them and
  // zeroes theirs for the next step.
  void reduce_into(const optim::Optimizer& opt);

  // The number of replicas for `requested` (0: automatic) on `threads` threads, for batches of
  // `rows` rows through dim x dim projections. 0 picks one per thread while such a GEMM is too
  // small for BLAS's own threads to pay off, else 1. Throws when `requested` exceeds `threads`.
  static int count(int requested, int threads, int64_t rows, int64_t dim);

 private:
  nn::Module& model_;
  std::vector<std::unique_ptr<nn::Module>> extra_;
  std::vector<std::vector<Generator*>> generators_;  // [replica][j]: replica's j-th dropout generator
  std::vector<Tensor> grads_;                        // [N] per extra replica
};

// ThreadReplicas::count on this process's threads for a --replicas option: a request above the
// threads is refused naming the option.
int replicas_for_flag(int requested, int64_t rows, int64_t dim);

}  // namespace rosetta::train
