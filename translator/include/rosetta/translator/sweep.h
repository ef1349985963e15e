// The bookkeeping of a sweep (rosetta sweep): its grid of configurations, one record per
// finished run (DIR/results.jsonl), the markdown table of the records and the selection by
// validation. Running the configurations (child processes, signals) is the CLI's.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rosetta::translator {

// One line of a grid file: NAME TRAIN-FLAGS...
struct SweepConfig {
  std::string name;
  std::string where;  // "GRID:LINE", for errors
  std::vector<std::string> flags;
};

// True for the flags the sweep gives every run itself (--out, --resume, --max-time, --dump-config).
bool sweep_sets_flag(const std::string& flag);

// The configurations of a grid file: one per line, NAME then flags split on whitespace; blank
// lines and lines starting with # are skipped. Throws naming GRID:LINE for a bad or repeated
// name or a flag the sweep sets, and the file when it holds no configuration.
std::vector<SweepConfig> read_sweep_grid(const std::string& path);

// What the sweep knows of one run: a line of DIR/results.jsonl. Missing values are empty.
struct SweepRecord {
  std::string name, flags, status;  // status: done | failed
  std::string error;                // why it failed
  std::optional<double> updates, epochs, train_s, wall_s;
  std::optional<double> best_valid_loss, best_valid_bleu, best_valid_chrf;
  std::optional<double> bleu_at_best_loss;  // the validation BLEU of best.safetensors
  std::optional<double> load_before, load_after;  // 1-minute load averages
  std::string max_time;             // the budget it was trained under
  std::vector<std::string> common;  // the flags every run of the sweep had

  // Fills updates, epochs, train_s and the best validation values from a run's metrics.jsonl
  // (a missing file leaves them empty).
  void summarize(const std::string& metrics_path);
  // The best validation value of `select` (bleu, chrf or loss).
  std::optional<double> best_valid(const std::string& select) const;
  // The value of the selection metric (bleu, chrf or loss), higher is better (minus the loss);
  // empty unless the run is done and validated.
  std::optional<double> metric(const std::string& select) const;
  std::string to_json() const;  // one line, no newline
};

// The records of DIR/results.jsonl (none if it does not exist). Throws naming FILE:LINE for a
// line that is not a record.
std::vector<SweepRecord> read_sweep_records(const std::string& path);

// Sorts best first by `select` (runs without a value last, in record order) and returns the
// markdown table of DIR/results.md; * marks the first when it can be selected.
std::string sweep_table(std::vector<SweepRecord>& records, const std::string& select);

// A value as the table shows it: `digits` decimals, or "-".
std::string sweep_cell(const std::optional<double>& v, int digits);

}  // namespace rosetta::translator
