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

#include "rosetta/core/random.h"
#include "rosetta/nn/module.h"
#include "rosetta/optim/optimizer.h"

namespace rosetta::cli {

class ThreadReplicas {
 public:
  // `extra` holds the models for replicas 1..n-1 (same parameter names and shapes as the
  // optimizer's parameters, in the same order); their values are overwritten with the
  // optimizer's and tied to them. `dropout[r]` is replica r's dropout generator (0: the
  // model's, whose state is the one that counts: it is what checkpoints save).
  ThreadReplicas(const optim::Optimizer& opt, std::vector<std::shared_ptr<nn::Module>> extra,
                 std::vector<Generator*> dropout);

  int size() const { return int(extra_.size()) + 1; }

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

  // How many replicas to use on `threads` threads for batches of `rows` tokens through
  // dim x dim projections: one per thread while such a GEMM is too small for BLAS's own
  // threads to pay off, else 1.
  static int auto_count(int threads, int64_t rows, int64_t dim);

 private:
  std::vector<std::shared_ptr<nn::Module>> extra_;
  std::vector<Generator*> dropout_;
  std::vector<Tensor> grads_;  // [N] per extra replica
};

}  // namespace rosetta::cli
