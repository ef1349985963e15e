// The training loop behind `rosetta train`: data, tokenizers, model, optimizer, validation,
// checkpoints (atomic), exact resume, and the run directory's logs.
#pragma once

#include <atomic>
#include <string>

#include "train_config.h"

namespace rosetta::cli {

struct TrainOutcome {
  int64_t steps = 0;
  double best_valid = 0;      // of --best-metric; NaN when never validated
  std::string stop_reason;     // "max-steps", "max-epochs", "max-time", "early-stopping", "interrupted"
};

// Runs (or resumes) a training run as configured; a new run writes `config_toml` (the
// effective configuration) to DIR/config.toml. `stop` is polled after every update: when it
// becomes true the run saves a checkpoint and returns with stop_reason "interrupted".
// Throws rosetta::Error on bad input or a non-finite loss with --on-nonfinite stop.
//
// Data-parallel: started by an MPI launcher (`mpirun -np N rosetta train ...`) or with
// --distributed, the run spans the N processes ("ranks") of the MPI job:
//   - an update takes N x accum consecutive batches of the (identically seeded) data order;
//     rank r computes batches r, r + N, ...; the gradients are weighted by each batch's share of
//     the update's target tokens and summed over the ranks (MPI_Allreduce on the optimizer's
//     flat gradient buffer). An update is the one a single process makes with --accum N x accum,
//     up to the order of float summation.
//   - rank 0 alone reads and writes the run directory (config, tokenizers, logs, metrics,
//     checkpoints) and sends what the others need (tokenizers, the checkpoint to resume from);
//     every rank reads the corpora. Validation is sharded over the ranks.
//   - a checkpoint's data position counts batches, not ranks: it resumes on any N.
//   - dropout masks differ per rank, drawn from a seed derived from --seed and the rank.
//   - a signal to any rank, --max-time and early stopping stop all ranks at the same update;
//     an error on any rank aborts the job.
// Threads per rank: --threads, else OMP_NUM_THREADS, else this machine's cores / its ranks.
TrainOutcome train(TrainConfig config, const std::string& config_toml,
                   const std::atomic<bool>* stop = nullptr);

}  // namespace rosetta::cli
