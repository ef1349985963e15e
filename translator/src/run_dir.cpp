#include "run_dir.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"

namespace rosetta::translator::detail {

namespace fs = std::filesystem;

using train::bytes_checksum;
using train::load_training_checkpoint;
using train::MetricsLog;
using train::ProcessGroup;
using train::save_model_weights;
using train::save_training_checkpoint;
using train::Trainer;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What every checkpoint and weights file says about the run besides what the train layer records.
std::map<std::string, std::string> run_metadata(const TrainConfig& c, const nn::Transformer& model, const RunData& d) {
  auto meta = model.options().to_metadata();
  meta["run.task"] = task_name(c.task);
  if (c.task == Task::copy) meta["run.copy_symbols"] = std::to_string(c.copy_symbols);
  if (!d.src_model.empty()) {
    meta[kSrcTokenizerKey] = bytes_checksum(d.src_model);
    meta[kTgtTokenizerKey] = bytes_checksum(d.tgt_model);
  }
  meta["rosetta.version"] = ROSETTA_VERSION;
  return meta;
}

}  // namespace

// ------------------------------------------------------------------ before the run

void check_run_dir(const RunPaths& run, bool resuming, bool restart) {
  ROSETTA_CHECK(!run.dir.empty(), "no run directory: give --out DIR (or --resume DIR)");
  if (resuming || restart) {
    ROSETTA_CHECK(fs::is_directory(run.dir), "--resume ", run.dir, " is not a directory");
    ROSETTA_CHECK(resuming || !fs::exists(run.best()), "--resume ", run.dir,
                  " holds no checkpoint.safetensors to resume from, but a best.safetensors that starting ",
                  "over would replace; move it away to start the run over");
  } else {
    ROSETTA_CHECK(!fs::exists(run.checkpoint()) && !fs::exists(run.best()) && !fs::exists(run.ema()), "--out ", run.dir,
                  " already holds a trained model; resume it with --resume ", run.dir,
                  " or choose another directory");
  }
}

void prepare_run_dir(const RunPaths& run) {
  ensure_directory(run.dir);
  std::vector<std::string> ours = run.trainer_files();
  ours.push_back(run.report());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run.dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& file : ours) {
      const std::string prefix = fs::path(file).filename().string() + ".tmp.";
      if (name.rfind(prefix, 0) != 0) continue;
      const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
      const bool alive = pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM);
      if (!alive) fs::remove(entry.path(), ec);
    }
  }
}

// ------------------------------------------------------------------ checkpoints

std::string to_str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

void save_checkpoint(const RunPaths& run, const TrainConfig& c, const RunData& d, const Trainer& trainer,
                     const data::BatchIterator& it, const Progress& p, double elapsed, train::KeepPrevious keep) {
  auto meta = run_metadata(c, static_cast<const nn::Transformer&>(trainer.model()), d);
  meta["train.batch_state"] = it.state().to_json();
  meta["train.best_valid"] = to_str(p.best_valid);
  meta["train.best_metric"] = best_metric_name(c.best_metric);
  meta["train.bad_validations"] = std::to_string(p.bad_validations);
  meta["train.elapsed_s"] = to_str(elapsed);
  meta["train.unlogged_loss"] = to_str(p.unlogged_loss);
  meta["train.unlogged_tokens"] = to_str(p.unlogged_tokens);
  if (p.schedule) {
    meta["train.schedule_warmup"] = std::to_string(p.schedule->warmup);
    meta["train.schedule_total"] = std::to_string(p.schedule->total);
    meta["train.schedule_anchor_step"] = std::to_string(p.schedule->anchor_step);
    meta["train.schedule_anchor_progress"] = to_str(p.schedule->anchor_progress);
  }
  save_training_checkpoint(run.checkpoint(), trainer, std::move(meta), keep);
}

Progress load_checkpoint(const std::string& path, const RunPaths& run, const TrainConfig& c, const RunData& d,
                         Trainer& trainer, data::BatchIterator& it) {
  const ProcessGroup& group = trainer.group();
  std::string bytes, unreadable;
  if (group.is_root()) {
    try {
      bytes = read_regular_file(path);
    } catch (const Error& e) {
      unreadable = e.what();
    }
  }
  group.broadcast(unreadable);
  ROSETTA_CHECK(unreadable.empty(), unreadable);
  group.broadcast(bytes);
  const SafeTensors st = parse_safetensors(bytes, path);
  bytes = std::string();
  // The tokenizers must be those it was trained with, and the architecture the one this run is
  // configured with.
  verify_tokenizers(st.metadata, path, run, d.src_model, d.tgt_model);
  try {
    const auto saved = nn::TransformerOptions::from_metadata(st.metadata).to_metadata();
    const auto wanted = static_cast<const nn::Transformer&>(trainer.model()).options().to_metadata();
    for (const auto& [key, value] : wanted) {
      const auto it = saved.find(key);
      const std::string was = it == saved.end() ? "(none)" : it->second;
      ROSETTA_CHECK(was == value, "it was trained with ", key, " = ", was, ", config.toml says ", value);
    }
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  load_training_checkpoint(st, path, trainer);
  Progress p;
  p.step = trainer.steps();
  // Runs of earlier versions kept the best validation loss only.
  const bool by_loss = !st.metadata.count("train.best_metric");
  const std::string metric = by_loss ? "loss" : st.metadata.at("train.best_metric");
  BestMetric best_metric = BestMetric::loss;
  try {
    best_metric = parse_best_metric(metric);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": train.best_metric: ", e.what());
  }
  p.best_valid = metadata_double(st.metadata, by_loss ? "train.best_valid_loss" : "train.best_valid", path);
  // A run continued with another --best-metric starts its best afresh (best.safetensors is
  // replaced at the next validation).
  if (best_metric != c.best_metric) p.best_valid = kNaN;
  p.bad_validations = metadata_int(st.metadata, "train.bad_validations", path);
  p.elapsed = metadata_double(st.metadata, "train.elapsed_s", path);
  if (st.metadata.count("train.unlogged_loss")) {  // runs of earlier versions saved at records only
    p.unlogged_loss = metadata_double(st.metadata, "train.unlogged_loss", path);
    p.unlogged_tokens = metadata_double(st.metadata, "train.unlogged_tokens", path);
  }
  if (st.metadata.count("train.schedule_total")) {
    optim::BudgetSchedule::State& s = p.schedule.emplace();
    s.warmup = metadata_int(st.metadata, "train.schedule_warmup", path);
    s.total = metadata_int(st.metadata, "train.schedule_total", path);
    s.anchor_step = metadata_int(st.metadata, "train.schedule_anchor_step", path);
    s.anchor_progress = metadata_double(st.metadata, "train.schedule_anchor_progress", path);
  }
  try {
    it.restore(data::BatchState::from_json(st.metadata.at("train.batch_state")));
  } catch (const std::out_of_range&) {
    ROSETTA_FAIL(path, ": data position or random state missing");
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  return p;
}

void truncate_metrics(const RunPaths& run, int64_t step) {
  for (const std::string& path : {run.metrics(), run.translations()}) MetricsLog::truncate(path, step);
}

// ------------------------------------------------------------------ weights files

void save_weights(const std::string& path, const TrainConfig& c, const nn::Transformer& model, const RunData& d,
                  int64_t step, const std::map<std::string, std::string>& extra) {
  auto meta = run_metadata(c, model, d);
  meta["train.step"] = std::to_string(step);
  for (auto& [k, v] : extra) meta[k] = v;
  save_model_weights(path, model, std::move(meta));
}

void prune_snapshots(const RunPaths& run, int64_t keep) {
  const auto snaps = step_snapshots(run.dir);  // by step
  std::error_code ec;
  for (size_t i = 0; i + size_t(keep) < snaps.size(); ++i) fs::remove(snaps[i].second, ec);
}

}  // namespace rosetta::translator::detail
