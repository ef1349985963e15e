// A training run of the translator as the named steps train_translator takes, in this order
// (internal to translator/src/run*.cpp; run.h says what a run does):
//
//   TrainingRun run(group, config, hooks, stop);  // the configuration checked, the run directory locked
//   run.plan();                      // threads and replicas; the run directory and the memory plan checked
//   run.read_data();                 // corpora and tokenizers (a run that fails here leaves nothing behind)
//   run.open_run_dir(config_toml);   // created; a new run's config, tokenizers and empty logs
//   run.build();                     // model, optimizer, schedule, trainer on its replicas, data order
//   run.restore();                   // --resume: the checkpoint's state
//   run.describe();                  // the memory, schedule and padding lines of the log
//   run.finish(run.loop());          // the updates, validations and checkpoints; the last ones
//
// set-up steps: run_setup.cpp; the loop, validation, checkpoints and the end: run_loop.cpp; the
// schedule that decays over the budget and its estimate of a time budget: run_budget.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/data/batch.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/optim/optimizer.h"
#include "rosetta/optim/schedule.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/replicas.h"
#include "rosetta/train/run_lock.h"
#include "rosetta/train/trainer.h"
#include "rosetta/translator/config.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/run_data.h"
#include "rosetta/translator/translator.h"
#include "run_dir.h"

namespace rosetta::translator::detail {

// The hooks, called on the root only (warn: on every rank).
struct Say {
  const RunHooks& hooks;
  bool root;
  void info(const std::string& line) const {
    if (root && hooks.info) hooks.info(line);
  }
  void warn(const std::string& line) const {
    if (hooks.warn) hooks.warn(line);
  }
};

class TrainingRun {
 public:
  // Takes the configuration as the run uses it (--resume DIR is the run directory; every value
  // checked, else throws) and locks the run directory: the root, for the job, before it reads
  // anything there.
  TrainingRun(const train::ProcessGroup& group, TrainConfig config, const RunHooks& hooks,
              const std::atomic<bool>* stop);
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Whether the run resumes (--resume of a run with a checkpoint; one without starts over), this
  // process's threads and its model replicas; the root checks the run directory and the
  // memory plan.
  void plan();
  // The data, before anything is written.
  void read_data();
  // Creates the run directory (the root); a new run writes `config_toml` (when not empty), the
  // tokenizers and empty logs. Sets the precision of matrix products and logs the run's first
  // lines: threads, kernels, data.
  void open_run_dir(const std::string& config_toml);
  // The model (seeded by --seed), optimizer, schedule, trainer on its replicas and the data order.
  void build();
  // Resuming: the checkpoint's weights, optimizer, progress and data position; the logs are cut
  // back to its step. Nothing for a new run.
  void restore();
  // Logs the model's memory and the largest batch's activations (measured), the schedule and
  // the padding of an epoch.
  void describe();
  // Updates until a rule stops the run; returns which.
  StopReason loop();
  // The last validation (unless the run was interrupted, stopped early or just validated), with
  // --ema that of the trained weights too, and the checkpoint; the outcome.
  TrainOutcome finish(StopReason stop_reason);

 private:
  // This process's training since the last log line, for its speed (the loss it logs is
  // Progress's, which a checkpoint keeps).
  struct Interval {
    double tokens = 0;
    double start = 0;  // elapsed() when it began
    double comm = 0;   // seconds in the gradient allreduce, waiting for the slowest rank included
    int64_t steps = 0;
  };

  // The rule that stops the run before the next update, if any.
  std::optional<StopReason> stopping_rule() const;
  // This rank's batches of the next update and their rows; returns the update's tokens (all ranks).
  int64_t next_batches(std::vector<data::Batch>& batches, std::vector<int64_t>& rows);
  // One update; false when it was skipped for non-finite values.
  bool update();
  // The training line of the log and metrics.jsonl, for the interval that ends now.
  void log_interval();
  // Collective: every rank validates its share and applies the same early-stopping rule to the
  // same loss; the root logs and keeps the best model. Returns true to stop early. With --ema the
  // moving average is what is validated, unless `trained` asks for the weights as trained (the
  // end of a run: where the rate decayed to zero they can be the better average), which count
  // for the best weights but not for early stopping.
  bool validate(bool trained = false);
  // Whether the end of the run chooses its best weights again (choose_final): with --ema, by BLEU
  // or chrF, where there are validation sentences.
  bool final_choice() const;
  // Collective, at the end of a run that validated the EMA and the trained weights: the weights
  // kept in best.safetensors (chosen on the first --valid-bleu-sentences, translated as
  // --valid-beam says) and the trained weights each translate every validation pair with
  // rosetta eval's beam; best.safetensors keeps the better. The periodic validations' sample
  // (greedy, the first sentences) is too noisy to choose between two weights this close; where
  // it chose wrongly: docs/results/recipes.md#half-batches-in-a-time-budget-and-the-trained-weights-at-the-end-2026-11-30-zen-4-ce201f8
  void choose_final();
  // The root writes the model's weights to best.safetensors, with `v`'s scores and whose they
  // are ("ema" or "trained") in its metadata, besides `extra`.
  void keep_best(const TranslationScores& v, const std::string& whose, std::map<std::string, std::string> extra = {});
  // Collective: the ranks agree, the root writes the checkpoint, snapshots and moving average.
  void save();
  // The schedule of --schedule: a BudgetSchedule (budget_) for linear and cosine, else by name.
  std::shared_ptr<optim::Schedule> make_run_schedule();
  // Resuming: the checkpoint's schedule state, then the budget of --max-steps (unchanged: nothing).
  void restore_budget();
  // After an update, with a time budget: whether to re-estimate it now, and the estimate (the
  // root's, on every rank), which re-anchors budget_.
  bool rebudget_due() const;
  void rebudget();
  // At the end of a time budget: throws where it ended inside a warm-up in updates before any log
  // line could measure it (rebudget's check never ran).
  void refuse_unmeasured_warmup() const;
  // Seconds of training, earlier processes of the run included.
  double elapsed() const;
  // What a stop for non-finite values leaves behind, for its message.
  std::string what_is_kept() const;

  const train::ProcessGroup& group_;
  const bool root_;
  const Say say_;
  const RunHooks& hooks_;
  const std::atomic<bool>* stop_;
  const TrainConfig c_;
  const RunPaths run_;
  const train::RunLock lock_;
  bool resuming_ = false, restart_ = false;
  train::ThreadPlan thread_plan_;
  RunData d_;
  std::optional<MatmulPrecisionScope> precision_;
  nn::TransformerOptions model_options_;
  std::unique_ptr<nn::Transformer> model_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::shared_ptr<const optim::Schedule> schedule_;
  std::shared_ptr<optim::BudgetSchedule> budget_;  // schedule_ when it is linear or cosine
  std::unique_ptr<train::Trainer> trainer_;
  std::unique_ptr<data::BatchIterator> it_;
  Progress p_;
  int64_t saved_step_ = -1;  // of the newest checkpoint (the one resumed from, or this run's last save)
  std::optional<train::MetricsLog> metrics_;  // the root's
  double max_time_ = 0;                       // --max-time in seconds (0: no limit)
  std::chrono::steady_clock::time_point t0_;  // when this process's loop began
  std::chrono::steady_clock::time_point t1_;  // when this process's first update ended
  int64_t process_steps_ = 0;                 // updates by this process
  bool early_estimates_ = false;              // the budget unknown at the loop's start: estimates at 1, 2, 4, ...
  Interval interval_;
  double last_norm_ = 0;
  float replica_diff_ = 0;
};

}  // namespace rosetta::translator::detail
