// A sweep (rosetta sweep): a grid of configurations trained one after another under the same
// budget, one record per finished run (DIR/results.jsonl), the markdown table of the records,
// the selection by validation, and the test of the selected run alone. The caller starts the
// runs (SweepHooks::run: child processes, signals) and says what the sweep tells it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rosetta/translator/config.h"

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
  // The best validation value of `select`.
  std::optional<double> best_valid(BestMetric select) const;
  // The value of the selection metric, higher is better (minus the loss); empty unless the run
  // is done and validated.
  std::optional<double> metric(BestMetric select) const;
  std::string to_json() const;  // one line, no newline
};

// The records of DIR/results.jsonl (none if it does not exist). Throws naming FILE:LINE for a
// line that is not a record.
std::vector<SweepRecord> read_sweep_records(const std::string& path);

// Sorts best first by `select` (runs without a value last, in record order) and returns the
// markdown table of DIR/results.md; * marks the first when it can be selected.
std::string sweep_table(std::vector<SweepRecord>& records, BestMetric select);

// A value as the table shows it: `digits` decimals, or "-".
std::string sweep_cell(const std::optional<double>& v, int digits);

// ------------------------------------------------------------------ running a sweep

// What `rosetta sweep` is asked.
struct SweepOptions {
  std::string grid;              // the grid file (read_sweep_grid)
  std::string out;               // DIR: runs/, results.jsonl, results.md, selected.json
  std::string max_time = "13m";  // every run's train --max-time
  BestMetric select = BestMetric::bleu;
  std::string test;              // a TSV test set for the selected run alone ("" = none)
  int beam = 4;                  // of the test's eval
  double length_penalty = 1.0;
  std::vector<std::string> common;  // train flags for every run
};

// How a sweep runs its children and what it tells its caller: the library starts no program
// and prints nothing. Only `run` is required.
struct SweepHooks {
  // Runs `rosetta ARGS...` (a train or an eval command) with standard input /dev/null, standard
  // output on `out_fd` and standard error on `err_fd`, and returns its wait status (waitpid's).
  std::function<int(const std::vector<std::string>& args, int out_fd, int err_fd)> run;
  // Throws when a run's train command would not parse or validate, so that a typo in the last
  // line of a grid fails the sweep before the first run, not hours later.
  std::function<void(const std::vector<std::string>& args)> check_train_flags;
  // Called once, when the first run is about to start (e.g. to pass signals on to the runs).
  std::function<void()> runs_begin;
  // True once the sweep should stop (e.g. after Ctrl-C): a run that ends then is kept without
  // a record, to be continued by the same sweep again.
  std::function<bool()> interrupted;
  std::function<void(const std::string&)> info, warn;  // lines for the log
  std::function<void(const std::string&)> print;       // the table and the selection, for stdout
};

// One configuration of a sweep and its train command: `rosetta train --out DIR/runs/NAME
// --max-time T COMMON FLAGS` (--resume for a run that was cut off); no command when it is
// recorded already, and skipped.
struct SweepStep {
  SweepConfig config;
  std::vector<std::string> args;
};

// The grid read and every configuration checked (hooks.check_train_flags) against the records
// of an earlier sweep into the same DIR, before anything runs. Throws naming the grid's line,
// results.jsonl, or the option.
std::vector<SweepStep> plan_sweep(const SweepOptions& options, const SweepHooks& hooks);

// The plan as --dry-run prints it: a command line per run, a comment per recorded one.
std::string sweep_dry_run(const SweepOptions& options, const std::vector<SweepStep>& plan);

// Runs the plan one run at a time, each recorded in results.jsonl and results.md as it ends (a
// failed run too, and the sweep goes on); then selects the best finished run by `select`
// (selected.json) and, with `test`, evaluates it alone. Throws when interrupted (no record of
// the run under way), when no run can be selected, or when the test's eval fails.
void run_sweep(const SweepOptions& options, const std::vector<SweepStep>& plan, const SweepHooks& hooks);

// A command as a shell would take it back: `rosetta` and the arguments, those with characters a
// shell would interpret single-quoted.
std::string sweep_command_line(const std::vector<std::string>& args);

}  // namespace rosetta::translator
