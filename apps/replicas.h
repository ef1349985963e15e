// Data parallelism across the threads of one process.
//
// Small models leave the second core idle: their GEMMs are too small for two BLAS threads to
// pay off (a 512 x 64 x 64 product runs slower on two threads than on one here), and every
// parallel region costs a thread wake-up. Replicas split the batch instead: replica t runs
// shard t through forward and backward on thread t, with BLAS on one thread inside, and the
// replicas' gradients are summed into the optimizer's before its step, as MPI ranks do.
//
// Replica 0 is the model the optimizer was built on. The others are models of the same
// architecture whose parameters are tied to its values (same storage: the optimizer's step
// updates all of them) and whose gradients live in flat buffers of their own, laid out as the
// optimizer's.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "rosetta/nn/transformer.h"
#include "rosetta/optim/optimizer.h"

namespace rosetta::cli {

class ThreadReplicas {
 public:
  // Replicas of `model`, whose parameters `opt` was built on: replica 0 is `model` itself, the
  // n-1 others are built with its options and tied to the optimizer's values. The state of the
  // model's dropout generator is the one that counts (checkpoints save it); the replicas'
  // generators are set from it at every run().
  ThreadReplicas(nn::Transformer& model, const optim::Optimizer& opt, int n);

  int size() const { return int(extra_.size()) + 1; }
  const nn::Transformer& model(int r) const { return r == 0 ? model_ : *extra_[size_t(r - 1)]; }

  // Splits a batch of `rows` rows (sentences) into one shard per replica and runs
  // f(r, begin, end) for replica r on rows [begin, end), all at once, one thread each (BLAS
  // single-threaded inside). Each replica's dropout generator draws its shard's rows of what
  // the model's would draw for the whole batch, so the masks, and the summed gradients up to
  // rounding, are those of one model on the whole batch. Rethrows the first exception a
  // replica threw, after all have finished.
  void run(int64_t rows, const std::function<void(int, int64_t, int64_t)>& f);

  // Moves the gradients of replicas 1..n-1 into the optimizer's (replica 0's): adds them and
  // zeroes theirs for the next step.
  void reduce_into(const optim::Optimizer& opt);

  // The number of replicas for `--replicas requested` on `threads` threads, for batches of
  // `rows` tokens through dim x dim projections. 0 picks one per thread while such a GEMM is
  // too small for BLAS's own threads to pay off, else 1. Throws when `requested` exceeds
  // `threads`.
  static int count(int requested, int threads, int64_t rows, int64_t dim);

 private:
  Generator& dropout(int r) {
    return r == 0 ? model_.dropout_generator() : extra_[size_t(r - 1)]->dropout_generator();
  }

  nn::Transformer& model_;
  std::vector<std::unique_ptr<nn::Transformer>> extra_;
  std::vector<Tensor> grads_;  // [N] per extra replica
};

}  // namespace rosetta::cli
