// A training run of a translator (or of the synthetic copy task) in a run directory: data,
// tokenizers, model, optimizer, validation, checkpoints (atomic), exact resume, metrics.jsonl,
// over thread replicas and MPI ranks. `rosetta train` is this with flags, logging and a
// progress line; a program of its own calls it with a TrainConfig and the hooks it wants.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "rosetta/translator/config.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

// The validation sentences whose translations every validation hands to RunHooks::validated
// (TranslationScores::src, ref and hyp): the first of the validation set, the same every time.
inline constexpr size_t kSampleSentences = 5;

// Why a run stopped, as train.log writes it ("stopped at step 12 (max-steps)"): --max-steps,
// --max-epochs, --max-time, --early-stopping, or a signal (the `stop` flag below).
enum class StopReason { max_steps, max_epochs, max_time, early_stopping, interrupted };
constexpr EnumNames<StopReason, 5> enum_names(StopReason) {
  return {"stop reason",
          {{{StopReason::max_steps, "max-steps"}, {StopReason::max_epochs, "max-epochs"},
            {StopReason::max_time, "max-time"}, {StopReason::early_stopping, "early-stopping"},
            {StopReason::interrupted, "interrupted"}}}};
}
inline StopReason parse_stop_reason(const std::string& s) { return parse_enum<StopReason>(s); }
inline const char* stop_reason_name(StopReason r) { return enum_name(r); }

struct TrainOutcome {
  int64_t steps = 0;
  double best_valid = 0;      // of --best-metric; NaN when never validated
  StopReason stop_reason = StopReason::max_steps;
  bool root = true;            // this process speaks for the run (rank 0 of an MPI job, or alone)
};

// What the run tells its caller (the library itself never logs). Every hook may be empty. In an
// MPI job, only rank 0 calls them, but `warn`, which every rank calls.
struct RunHooks {
  std::function<void(const std::string&)> info;  // a line for the log
  std::function<void(const std::string&)> warn;
  // When set, the periodic training line goes here, short, as a progress display, instead of
  // to `info` (metrics.jsonl has it either way).
  std::function<void(const std::string&)> progress;
  // The run directory exists (the root's, after the data was read): e.g. log to its train.log.
  std::function<void(const RunPaths&)> run_dir_ready;
  // After a validation, on the root: e.g. record the translations and rewrite a report. An
  // exception it throws is passed to `warn`; training goes on.
  std::function<void(const RunPaths&, int64_t step, const TranslationScores&)> validated;
};

// Runs (or resumes) a training run as configured; a new run writes `config_toml` (the
// effective configuration) to DIR/config.toml. `stop` is polled after every update: when it
// becomes true the run saves a checkpoint and returns with StopReason::interrupted.
// Throws rosetta::Error on bad input or a non-finite loss with --on-nonfinite stop.
//
// Data-parallel: started by an MPI launcher (`mpirun -np N rosetta train ...`) or with
// `distributed`, the run spans the N processes ("ranks") of the MPI job:
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
TrainOutcome train_translator(TrainConfig config, const std::string& config_toml, const RunHooks& hooks = {},
                              const std::atomic<bool>* stop = nullptr);

}  // namespace rosetta::translator
