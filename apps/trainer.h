// The training loop behind `rosetta train`: data, tokenizers, model, optimizer, validation,
// checkpoints (atomic), exact resume, and the run directory's logs.
#pragma once

#include <atomic>
#include <string>

#include "train_config.h"

namespace rosetta::cli {

struct TrainOutcome {
  int64_t steps = 0;
  double best_valid_loss = 0;  // NaN when never validated
  std::string stop_reason;     // "max-steps", "max-epochs", "max-time", "early-stopping", "interrupted"
};

// Runs (or resumes) a training run as configured; a new run writes `config_toml` (the
// effective configuration) to DIR/config.toml. `stop` is polled after every update: when it
// becomes true the run saves a checkpoint and returns with stop_reason "interrupted".
// Throws rosetta::Error on bad input or a non-finite loss with --on-nonfinite stop.
TrainOutcome train(TrainConfig config, const std::string& config_toml,
                   const std::atomic<bool>* stop = nullptr);

}  // namespace rosetta::cli
