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

#include "rosetta/core/lifetime.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"
#include "rosetta/nn/module.h"
#include "rosetta/optim/optimizer.h"

namespace rosetta::train {

// The distinct random generators of the nn::Dropout modules in `model`'s tree, in module order
// (a model whose dropouts share one generator has one).
std::vector<Generator*> dropout_generators(const nn::Module& model);

// How a process's threads train: `replicas` model replicas, each on its own thread with a shard
// of every batch, and `inner_threads` threads in each replica's large bf16 products (nested:
// OpenBLAS's fp32 products and the other kernels stay on the replica's thread).
struct ThreadPlan {
  int replicas = 1;
  int inner_threads = 1;
};

class ThreadReplicas {
 public:
  // A new model of the same architecture as the trained one (its weights and random state are
  // replaced by the model's).
  using Factory = std::function<std::unique_ptr<nn::Module>()>;

  // Replicas of `model`, whose parameters `opt` was built on: replica 0 is `model` itself, the
  // n-1 others come from `make` and are tied to the optimizer's values. The state of the model's
  // dropout generators is the one that counts (checkpoints save it); the replicas' are set from
  // it at every run(). `make` may be empty when n is 1.
  ThreadReplicas(nn::Module& model, const optim::Optimizer& opt, int n, const Factory& make,
                 int inner_threads = 1);

  int size() const { return int(extra_.size()) + 1; }
  nn::Module& model(int r) const ROSETTA_LIFETIMEBOUND { return r == 0 ? model_ : *extra_[size_t(r - 1)]; }

  // Splits a batch of `rows` rows (sentences) into one shard per replica and runs
  // f(r, begin, end) for replica r on rows [begin, end), all at once, one thread each (BLAS
  // single-threaded inside). Each replica's dropout generators draw its shard's rows of what
  // the model's would draw for the whole batch, so the masks, and the summed gradients up to
  // rounding, are those of one model on the whole batch. In bf16 the model's weights are packed
  // for the products once (again only after they change) and all replicas read that packing
  // (SharedPackedWeights). Rethrows the first exception a replica threw, after all have finished.
  void run(int64_t rows, const std::function<void(int, int64_t, int64_t)>& f);

  // The model's weights as packed for the replicas' bf16 products by the last run() (none in fp32).
  const SharedPackedWeights& packed_weights() const ROSETTA_LIFETIMEBOUND { return packed_; }

  // Moves the gradients of replicas 1..n-1 into the optimizer's (replica 0's): adds them, and
  // theirs count as zero for the next step without being written (Var::zero_grad_lazily: their
  // next gradients are written over them, so neither this nor the weight gradients' products
  // pass over them to clear them).
  void reduce_into(const optim::Optimizer& opt);

  // The plan for `requested` replicas (0: automatic) on `threads` threads, for batches of `rows`
  // rows (tokens) through dim x dim projections. Automatic: one replica while a batch's
  // projection is large enough for all threads in each product (2^28 multiply-adds), else one
  // per thread, as long as each replica's shard keeps kMinShardRows rows (GEMMs of fewer rows
  // run far below the roof); past that, fewer replicas (a divisor of `threads`) with the other
  // threads inside their products. Requested: that many, the threads shared among them. Throws
  // when `requested` exceeds `threads`.
  static ThreadPlan plan(int requested, int threads, int64_t rows, int64_t dim);
  // plan(...).replicas.
  static int count(int requested, int threads, int64_t rows, int64_t dim);
  // bf16 products of 1 x 256 x 256 per row ran at 0.44 (8 rows), 0.55 (16), 0.78 (32), 0.83 (64)
  // and 0.95 (128) of their speed at 1,024 rows, fp32 ones at 0.46, 0.64, 0.77, 0.89 and 0.94
  // (Zen 4, one thread, bench/gemm_bench.cpp's shapes).
  static constexpr int64_t kMinShardRows = 64;

 private:
  nn::Module& model_;
  std::vector<std::unique_ptr<nn::Module>> extra_;
  std::vector<std::vector<Generator*>> generators_;  // [replica][j]: replica's j-th dropout generator
  std::vector<Tensor> grads_;                        // [N] per extra replica
  std::vector<std::vector<Var>> params_;             // per extra replica: its parameters (gradients in grads_)
  int inner_threads_ = 1;
  SharedPackedWeights packed_;  // the model's weights packed for bf16 products (none in fp32)
};

// ThreadReplicas::plan on this process's threads for a --replicas option: a request above the
// threads is refused naming the option.
ThreadPlan thread_plan_for_flag(int requested, int64_t rows, int64_t dim);

}  // namespace rosetta::train
