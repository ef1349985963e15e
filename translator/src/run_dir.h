// The run directory of a translator run (internal to translator/src/run*.cpp): what it must hold
// before a run starts, the training checkpoint a run saves and resumes from, and the weights
// files it writes for translate and average. RunPaths (translator.h) names the files.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "rosetta/data/batch.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/optim/schedule.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/trainer.h"
#include "rosetta/translator/config.h"
#include "rosetta/translator/run_data.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator::detail {

// ------------------------------------------------------------------ before the run

// What the run directory must (not) hold; checked before the data is read, so that a refusal
// is immediate. `restart`: --resume of a run stopped before its first checkpoint, which starts
// over.
void check_run_dir(const RunPaths& run, bool resuming, bool restart);

// Once the data has been read: creates the run directory and removes the temporary files
// (write_file_atomic's `NAME.tmp.PID.N`) of writes that a process no longer running left
// unfinished.
void prepare_run_dir(const RunPaths& run);

// ------------------------------------------------------------------ checkpoints

// Where the run stands besides what the trainer and the data order hold; saved with them.
struct Progress {
  int64_t step = 0;
  double best_valid = std::numeric_limits<double>::quiet_NaN();  // of --best-metric
  int64_t bad_validations = 0;
  double elapsed = 0;  // seconds of training before this process
  // The updates since the last training record (loss x tokens, tokens): kept in the checkpoint,
  // so that a run stopped between two records writes the next one as if it had never stopped.
  double unlogged_loss = 0, unlogged_tokens = 0;
  // A linear or cosine schedule's state (its estimate of the budget), so that a resumed run
  // continues with the same rates; none for the other schedules, and in runs of earlier versions.
  std::optional<optim::BudgetSchedule::State> schedule;
};

// A double as metadata text, with the 17 digits that read back to the same double.
std::string to_str(double v);

// checkpoint.safetensors: the trainer's state (train/checkpoint.h) with what every weights file
// says about the run (model options, task, tokenizers' checksums, version), the data position
// of `it`, the progress `p` (the schedule's state as train.schedule_*) and the seconds of training
// `elapsed`; `keep`: whether the checkpoint it replaces stays as the previous one.
void save_checkpoint(const RunPaths& run, const TrainConfig& c, const RunData& d, const train::Trainer& trainer,
                     const data::BatchIterator& it, const Progress& p, double elapsed, train::KeepPrevious keep);

// Restores `trainer` and `it` from the checkpoint at `path` (checkpoint.safetensors or the one
// before it) and returns the progress. The root reads the checkpoint and sends its bytes (or why
// it could not) to the other ranks, which need no access to the run directory; every rank then
// restores the same state (the dropout stream, its own), or throws the same error. Throws naming
// the file when its tokenizers or model options are not this run's.
Progress load_checkpoint(const std::string& path, const RunPaths& run, const TrainConfig& c, const RunData& d,
                         train::Trainer& trainer, data::BatchIterator& it);

// Keeps the lines of metrics.jsonl and translations.jsonl of steps up to `step` (those a resumed
// run will not repeat).
void truncate_metrics(const RunPaths& run, int64_t step);

// ------------------------------------------------------------------ weights files

// The model's weights as a file translate and average read (best.safetensors, ema.safetensors,
// step-N.safetensors), with the run's metadata, train.step and `extra`.
void save_weights(const std::string& path, const TrainConfig& c, const nn::Transformer& model, const RunData& d,
                  int64_t step, const std::map<std::string, std::string>& extra = {});

// Keeps the `keep` snapshots step-N.safetensors of the highest N in the run directory.
void prune_snapshots(const RunPaths& run, int64_t keep);

}  // namespace rosetta::translator::detail
