#include "rosetta/translator/run.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/io.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/data/batch.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/noise.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/replicas.h"
#include "rosetta/train/resources.h"
#include "rosetta/translator/memory_plan.h"
#include "rosetta/translator/run_data.h"
#include "rosetta/train/run_lock.h"
#include "rosetta/train/trainer.h"

namespace rosetta::translator {

namespace fs = std::filesystem;

using train::bytes_checksum;
using train::CheckpointFallback;
using train::EmaWeights;
using train::format_size;
using train::keep_previous_checkpoint;
using train::keeping_last_checkpoint;
using train::launched_by_mpi;
using train::launched_size;
using train::load_with_fallback;
using train::load_training_checkpoint;
using train::MemoryBudget;
using train::MetricRecord;
using train::MetricsLog;
using train::mpi_built;
using train::NonFiniteError;
using train::previous_checkpoint;
using train::ProcessGroup;
using train::RunLock;
using train::save_model_weights;
using train::save_training_checkpoint;
using train::set_aside_checkpoint;
using train::ShardLoss;
using train::StepResult;
using train::thread_plan_for_flag;
using train::ThreadPlan;
using train::Trainer;
using train::TrainerOptions;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using rosetta::detail::concat;

using rosetta::detail::num;

// ------------------------------------------------------------------ run directory

// What the run directory must (not) hold; checked before the data is read, so that a refusal
// is immediate. `restart`: --resume of a run stopped before its first checkpoint, which starts
// over.
void check_run_dir(const RunPaths& run, bool resuming, bool restart) {
  ROSETTA_CHECK(!run.dir.empty(), "no run directory: give --out DIR (or --resume DIR)");
  if (resuming || restart) {
    ROSETTA_CHECK(fs::is_directory(run.dir), "--resume ", run.dir, " is not a directory");
    ROSETTA_CHECK(resuming || !fs::exists(run.best()), "--resume ", run.dir,
                  " holds no checkpoint.safetensors to resume from, but a best.safetensors that starting ",
                  "over would replace; move it away to start the run over");
  } else {
    ROSETTA_CHECK(!fs::exists(run.checkpoint()) && !fs::exists(run.best()), "--out ", run.dir,
                  " already holds a trained model; resume it with --resume ", run.dir,
                  " or choose another directory");
  }
}

// Once the data has been read: creates the run directory and removes the temporary files
// (write_file_atomic's `NAME.tmp.PID.N`) of writes that a process no longer running left
// unfinished.
void prepare_run_dir(const RunPaths& run) {
  ensure_directory(run.dir);
  const std::string ours[] = {run.config(), run.src_model(), run.tgt_model(), run.checkpoint(),
                              previous_checkpoint(run.checkpoint()), run.best(), run.metrics(), run.ema(),
                              run.translations(), run.report()};
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

struct Progress {
  int64_t step = 0;
  double best_valid = kNaN;  // of --best-metric
  int64_t bad_validations = 0;
  double elapsed = 0;  // seconds of training before this process
};

std::string to_str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// What every checkpoint and weights file says about the run besides what the train layer records.
std::map<std::string, std::string> run_metadata(const TrainConfig& c, const nn::Transformer& model, const RunData& d) {
  auto meta = model.options().to_metadata();
  meta["run.task"] = c.task;
  if (c.task == "copy") meta["run.copy_symbols"] = std::to_string(c.copy_symbols);
  if (!d.src_model.empty()) {
    meta[kSrcTokenizerKey] = bytes_checksum(d.src_model);
    meta[kTgtTokenizerKey] = bytes_checksum(d.tgt_model);
  }
  meta["rosetta.version"] = ROSETTA_VERSION;
  return meta;
}

void save_checkpoint(const RunPaths& run, const TrainConfig& c, const RunData& d, const Trainer& trainer,
                     const data::BatchIterator& it, const Progress& p, double elapsed, KeepPrevious keep) {
  auto meta = run_metadata(c, static_cast<const nn::Transformer&>(trainer.model()), d);
  meta["train.batch_state"] = it.state().to_json();
  meta["train.best_valid"] = to_str(p.best_valid);
  meta["train.best_metric"] = c.best_metric;
  meta["train.bad_validations"] = std::to_string(p.bad_validations);
  meta["train.elapsed_s"] = to_str(elapsed);
  save_training_checkpoint(run.checkpoint(), trainer, std::move(meta), keep);
}

// The root reads the checkpoint at `path` and sends its bytes (or why it could not) to the other
// ranks, which need no access to the run directory; every rank then restores the same state (the
// dropout stream, its own), or throws the same error.
Progress load_checkpoint(const std::string& path, const RunPaths& run, const TrainConfig& c, const RunData& d,
                         Trainer& trainer, data::BatchIterator& it) {
  const ProcessGroup& group = trainer.group();
  std::string bytes, unreadable;
  if (group.is_root()) {
    try {
      bytes = read_file(path);
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
  ROSETTA_CHECK(metric == "loss" || metric == "bleu" || metric == "chrf", path, ": train.best_metric = '", metric,
                "' is not loss, bleu or chrf");
  p.best_valid = metadata_double(st.metadata, by_loss ? "train.best_valid_loss" : "train.best_valid", path);
  // A run continued with another --best-metric starts its best afresh (best.safetensors is
  // replaced at the next validation).
  if (metric != c.best_metric) p.best_valid = kNaN;
  p.bad_validations = metadata_int(st.metadata, "train.bad_validations", path);
  p.elapsed = metadata_double(st.metadata, "train.elapsed_s", path);
  try {
    it.restore(data::BatchState::from_json(st.metadata.at("train.batch_state")));
  } catch (const std::out_of_range&) {
    ROSETTA_FAIL(path, ": data position or random state missing");
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  return p;
}

// Keeps the lines of metrics.jsonl and translations.jsonl of steps up to `step` (those a resumed
// run will not repeat).
void truncate_metrics(const RunPaths& run, int64_t step) {
  for (const std::string& path : {run.metrics(), run.translations()}) MetricsLog::truncate(path, step);
}

// ------------------------------------------------------------------ validation

using ValidResult = TranslationScores;

ValidResult validate(nn::Transformer& model, const RunData& d, const TrainConfig& c, const ProcessGroup& group) {
  const auto search = nn::SearchOptions().beam(c.valid_beam).length_penalty(c.valid_length_penalty);
  return validate_translation(model, d.codec, d.valid, d.valid_text, c.max_tokens, size_t(c.valid_bleu_sentences),
                              search, kSampleSentences, group);
}

// Every rank gets the root's BLEU and chrF (the others hold NaN), so that all apply the same
// selection and early-stopping rule.
void share_scores(const ProcessGroup& group, ValidResult& r) {
  if (group.size() == 1) return;
  double scores[2] = {group.is_root() ? r.bleu : 0.0, group.is_root() ? r.chrf : 0.0};
  group.sum(scores, 2);
  r.bleu = scores[0];
  r.chrf = scores[1];
}

// ------------------------------------------------------------------ the loop

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Var> params) {
  if (c.optimizer == "sgd") {
    optim::SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  optim::AdamOptions o;
  o.lr = c.lr;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.decoupled = c.optimizer == "adamw";
  return std::make_unique<optim::Adam>(std::move(params), o);
}

// Memory of one update on the largest batch of the epoch: forward + backward measured with the
// allocator (activations, gradients of activations). Restores every state it touches.
size_t measure_batch_memory(nn::Transformer& model, optim::Optimizer& opt, const data::BatchIterator& it,
                            const TrainConfig& c) {
  const auto plan = data::plan_epoch(it.pairs(), it.options(), 0);
  size_t best = 0, best_cost = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    size_t s = 0, t = 0;
    for (uint32_t i : plan[b]) {
      s = std::max(s, it.pairs()[i].src.size());
      t = std::max(t, it.pairs()[i].tgt.size() + 1);
    }
    const size_t cost = plan[b].size() * (s + t);
    if (cost > best_cost) best_cost = cost, best = b;
  }
  const data::Batch batch = data::collate(it.pairs(), plan[best], it.options());
  Generator& g = model.dropout_generator();
  const uint64_t seed = g.seed(), counter = g.counter();
  reset_allocator_peak();
  const size_t before = allocator_stats().in_use_bytes;
  {
    const Var loss = cross_entropy(model.forward(batch.src, batch.tgt_in), batch.tgt_out,
                                   c.label_smoothing, data::kPadId);
    loss.backward();
  }
  const size_t peak = allocator_stats().peak_bytes;
  opt.zero_grad();
  g.set_state(seed, counter);
  return peak - before;
}

// The share of padding in the current epoch's batches (source, target): compute spent on
// nothing, which length bucketing keeps small.
std::pair<double, double> padding_share(const data::BatchIterator& it) {
  const auto plan = data::plan_epoch(it.pairs(), it.options(), it.epoch());
  double src_real = 0, src_all = 0, tgt_real = 0, tgt_all = 0;
  for (const auto& batch : plan) {
    size_t s = 0, t = 0;
    for (uint32_t i : batch) {
      const auto& p = it.pairs()[i];
      s = std::max(s, p.src.size());
      t = std::max(t, p.tgt.size() + 1);
      src_real += double(p.src.size());
      tgt_real += double(p.tgt.size() + 1);
    }
    src_all += double(s * batch.size());
    tgt_all += double(t * batch.size());
  }
  return {1 - src_real / std::max(src_all, 1.0), 1 - tgt_real / std::max(tgt_all, 1.0)};
}

// Target tokens (non-pad entries) of a shard of a batch's tgt_out.
int64_t count_tokens(const Tensor& tgt_out) {
  const Tensor ids = tgt_out.contiguous();
  const int32_t* p = ids.data<int32_t>();
  int64_t k = 0;
  for (int64_t i = 0; i < ids.numel(); ++i) k += p[i] != data::kPadId;
  return k;
}

// Threads of each rank: --threads, else OMP_NUM_THREADS, else this machine's cores shared by the
// ranks on it (so `mpirun -np 2` on 8 cores runs 2 x 4 threads, not 2 x 8).
int threads_for(const TrainConfig& c, const ProcessGroup& group) {
  if (c.threads > 0 || group.size() == 1 || std::getenv("OMP_NUM_THREADS")) return c.threads;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(get_num_threads(), cores / group.local_size()));
}

// The model's weights as a file translate and average read: best.safetensors, ema.safetensors,
// step-N.safetensors.
void save_weights(const std::string& path, const TrainConfig& c, const nn::Transformer& model, const RunData& d,
                  int64_t step, const std::map<std::string, std::string>& extra = {}) {
  auto meta = run_metadata(c, model, d);
  meta["train.step"] = std::to_string(step);
  for (auto& [k, v] : extra) meta[k] = v;
  save_model_weights(path, model, std::move(meta));
}

// Keeps the `keep` snapshots step-N.safetensors of the highest N in the run directory.
void prune_snapshots(const RunPaths& run, int64_t keep) {
  const auto snaps = step_snapshots(run.dir);  // by step
  std::error_code ec;
  for (size_t i = 0; i + size_t(keep) < snaps.size(); ++i) fs::remove(snaps[i].second, ec);
}

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

TrainOutcome train_in(const ProcessGroup& group, TrainConfig c, const std::string& config_toml,
                      const RunHooks& hooks, const std::atomic<bool>* stop) {
  const bool root = group.is_root();
  const Say say{hooks, root};
  if (!c.resume.empty()) c.out = c.resume;
  c.validate();
  const RunPaths run(c.out);
  // This process owns the run directory (the root, for the job) before it reads anything there.
  const RunLock lock(root ? run.dir : "", c.resume.empty());
  if (!lock.warning().empty()) say.warn(lock.warning());
  // --resume of a run stopped before its first checkpoint starts it over from its config.toml.
  const bool resuming = !c.resume.empty() && group.any(root && (fs::exists(run.checkpoint()) ||
                                                                  fs::exists(previous_checkpoint(run.checkpoint()))));
  const bool restart = !c.resume.empty() && !resuming;
  set_num_threads(threads_for(c, group));
  const ThreadPlan thread_plan = thread_plan_for_flag(c.replicas, c.max_tokens, c.model.d_model());
  const int n_replicas = thread_plan.replicas;
  if (root) check_run_dir(run, resuming, restart);
  if (root) MemoryBudget(c.memory_limit).check(training_plan(c, n_replicas, group.local_size()));

  // The data first: a run that fails on it leaves nothing behind.
  RunData d;
  if (c.task == "copy") make_copy_task(c, d);
  else load_text_data(c, run, resuming, group, d);

  if (root) {
    prepare_run_dir(run);
    if (hooks.run_dir_ready) hooks.run_dir_ready(run);
  }
  if (restart && root) say.warn(run.dir + " holds no checkpoint yet: starting the run over from its config.toml");
  say.info(concat(resuming ? "resuming" : "starting", " run in ", run.dir, " (", get_num_threads(), " threads, BLAS ",
                  blas_core_name(), ")"));
  std::string precision_note;
  const MatmulPrecisionScope precision(resolve_precision(c.precision, &precision_note));
  if (!precision_note.empty()) say.info(precision_note);
  if (const std::string w = blas_kernels_warning(); !w.empty()) say.warn(w);
  say.info(kernels_line());
  if (group.size() > 1)
    say.info(concat("data-parallel over ", group.size(), " processes (", group.local_size(), " on this machine, ",
                    get_num_threads(), " threads each): an update takes ", group.size(), " x ", c.accum, " batches"));
  if (root && !resuming) {
    if (!config_toml.empty()) write_file_atomic(run.config(), config_toml);
    write_tokenizers(run, d);
    write_file_atomic(run.metrics(), "");  // a fresh run's metrics start empty
    write_file_atomic(run.translations(), "");
  }
  for (const std::string& note : d.notes) say.info(note);
  say.info(concat("data: ", d.train.size(), " training pairs, ", d.valid.size(), " validation pairs"));

  Generator init(c.seed);
  const nn::TransformerOptions model_options = c.model_options(d.codec.src_vocab(), d.codec.tgt_vocab());
  nn::Transformer model(model_options, init);
  model.train();
  auto opt = make_optimizer(c, model.parameters());
  const std::shared_ptr<const optim::Schedule> schedule = optim::make_schedule(
      c.schedule, c.lr, c.warmup, std::max<int64_t>(c.max_steps, c.warmup + 1), c.model.d_model());
  // Replicas 1..n-1 are tied to the model's weights (train/replicas.h): their weights follow
  // the model's through resume and broadcast, since both write the shared values in place.
  Trainer trainer(model, *opt,
                  TrainerOptions()
                      .replicas(n_replicas)
                      .replica_threads(thread_plan.inner_threads)
                      .clip(c.clip)
                      .stop_on_nonfinite(c.on_nonfinite == "stop")
                      .ema(c.ema),
                  [&model_options] {
                    Generator g(0);  // its weights and random state give way to the model's
                    return std::make_unique<nn::Transformer>(model_options, g);
                  },
                  schedule, group);
  if (n_replicas > 1 && thread_plan.inner_threads == 1)
    say.info(concat(n_replicas, " model replicas, one per thread, each train a shard of every batch (--replicas)"));
  else if (n_replicas > 1)
    say.info(concat(n_replicas, " model replicas, each train a shard of every batch on ", thread_plan.inner_threads,
                    " threads in its bf16 products (--replicas)"));
  data::BatchIterator it(d.train, data::BatchOptions().max_tokens(size_t(c.max_tokens)).seed(c.seed));
  if (d.sampler) it.set_resampler([&d, seed = c.seed](uint64_t epoch) { return d.sampler->sample(seed, epoch); });
  Progress p;
  if (resuming) {
    // The newest checkpoint that loads: one that does not is set aside, with a warning.
    const CheckpointFallback from = load_with_fallback(
        run.checkpoint(), [&](const std::string& path) { p = load_checkpoint(path, run, c, d, trainer, it); });
    if (!from.skipped.empty()) {
      const std::string aside = root ? set_aside_checkpoint(run.checkpoint()) : "";
      if (root) say.warn(concat(from.skipped[0], "; resuming from the checkpoint before it, ", from.path,
                                aside.empty() ? "" : ", and keeping the skipped one as " + aside));
    }
    if (root) truncate_metrics(run, p.step);
    say.info(concat("resumed at step ", p.step, " (epoch ", it.epoch(), ", batch ", it.position(), ")"));
  }

  const int64_t n = model.parameter_count();
  const double opt_bytes = double(opt->state_tensors().size()) * 4.0 * double(n);
  const size_t act = measure_batch_memory(model, *opt, it, c);
  say.info(concat("model: ", n, " parameters (", format_size(4.0 * double(n)), "); gradients ",
                  format_size(4.0 * double(n)), "; optimizer state ", format_size(opt_bytes), " (", opt->name(),
                  "); largest batch's activations ", format_size(double(act))));
  const auto [src_pad, tgt_pad] = padding_share(it);
  say.info(concat("schedule: ", schedule->describe(), "; ", it.batches_in_epoch(), " batches per epoch, padding ",
                  num("%.1f", 100 * src_pad), "% of source and ", num("%.1f", 100 * tgt_pad), "% of target positions"));

  std::optional<MetricsLog> metrics;  // the root's
  if (root) metrics.emplace(run.metrics());
  auto write_metrics = [&](const MetricRecord& r) {
    if (metrics) metrics->write(r);
  };
  const double max_time = c.max_time_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return p.elapsed + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  TrainOutcome outcome;
  double interval_loss = 0, interval_tokens = 0, interval_time_start = elapsed();
  double interval_comm = 0;  // seconds in the gradient allreduce, waiting for the slowest rank included
  int64_t interval_steps = 0;
  double last_norm = 0;
  float replica_diff = 0;

  int64_t saved_step = resuming ? p.step : -1;  // of the newest checkpoint
  auto save = [&] {
    replica_diff = std::max(replica_diff, trainer.synchronize());
    if (!root) return;
    keeping_last_checkpoint(run.checkpoint(), [&] {  // a full disk: the error says what is kept
      // The newest two steps' checkpoints are kept, for a resume to fall back on the older; a
      // second save at one step (the last) replaces the newest.
      const KeepPrevious keep = p.step != saved_step ? KeepPrevious::yes : KeepPrevious::no;
      save_checkpoint(run, c, d, trainer, it, p, elapsed(), keep);
      saved_step = p.step;
      if (c.keep_checkpoints > 0) {
        save_weights(run.snapshot(p.step), c, model, d, p.step);
        prune_snapshots(run, c.keep_checkpoints);
      }
      if (trainer.ema().defined()) {
        const EmaWeights swap(trainer);
        save_weights(run.ema(), c, model, d, p.step, {{"train.ema", to_str(c.ema)}});
      }
    });
  };
  // Collective: every rank validates its share and applies the same early-stopping rule to the
  // same loss; the root logs and keeps the best model.
  auto do_validation = [&] {
    const EmaWeights swap(trainer);  // with --ema, the average is what is validated and kept
    ValidResult v = validate(model, d, c, group);
    if (std::isnan(v.loss)) return false;
    share_scores(group, v);
    write_metrics({{"kind", "valid"}, {"step", p.step}, {"loss", v.loss}, {"ppl", std::exp(v.loss)},
                   {"bleu", v.bleu}, {"chrf", v.chrf}, {"exact", v.exact}, {"elapsed_s", elapsed()}});
    const bool by_loss = c.best_metric == "loss";
    const double value = by_loss ? v.loss : c.best_metric == "bleu" ? v.bleu : v.chrf;
    const bool improved = !std::isnan(value) && (std::isnan(p.best_valid) ||
                                                 (by_loss ? value < p.best_valid : value > p.best_valid));
    say.info(concat("valid step ", p.step, ": loss ", num("%.4f", v.loss), " ppl ", num("%.2f", std::exp(v.loss)),
                    " BLEU ", num("%.2f", v.bleu), " chrF ", num("%.2f", v.chrf),
                    improved ? " (best " + c.best_metric + ")" : ""));
    if (improved) {
      p.best_valid = value;
      p.bad_validations = 0;
      if (root)
        keeping_last_checkpoint(run.checkpoint(), [&] {
          save_weights(run.best(), c, model, d, p.step,
                       {{"valid.loss", to_str(v.loss)}, {"valid.bleu", to_str(v.bleu)}, {"valid.chrf", to_str(v.chrf)}});
        });
    } else {
      ++p.bad_validations;
    }
    if (root && hooks.validated) {  // e.g. a report that follows the run; it never stops training
      try {
        hooks.validated(run, p.step, v);
      } catch (const std::exception& e) {
        say.warn(e.what());
      }
    }
    return c.early_stopping > 0 && p.bad_validations >= c.early_stopping;
  };
  // What a stop for non-finite values leaves behind, for its message.
  auto kept = [&]() -> std::string {
    if (!root) return "rank 0 keeps its last checkpoint";
    return fs::exists(run.checkpoint()) ? "the last checkpoint in " + run.dir + " is intact"
                                        : "no checkpoint was written yet";
  };

  const int64_t ranks = group.size(), rank = group.rank();
  while (true) {
    if (c.max_steps > 0 && p.step >= c.max_steps) { outcome.stop_reason = "max-steps"; break; }
    if (c.max_epochs > 0 && int64_t(it.epoch()) >= c.max_epochs) { outcome.stop_reason = "max-epochs"; break; }
    if (max_time > 0 && group.any(elapsed() >= max_time)) { outcome.stop_reason = "max-time"; break; }

    // One update from the global batch: the next ranks x accum batches of the data order, which
    // every rank serves; rank r computes every ranks-th from the r-th. Each batch's loss is
    // weighted by its share of the global batch's tokens, so the gradients summed over the ranks
    // are the gradient of the global batch: the update one process makes with --accum ranks x accum.
    std::vector<data::Batch> batches;
    std::vector<int64_t> rows;
    int64_t tokens = 0;
    for (int64_t i = 0; i < ranks * c.accum; ++i) {
      const uint64_t epoch = it.epoch();
      data::Batch b = it.next();
      if (c.word_dropout > 0) data::word_dropout(b, c.word_dropout, c.word_dropout, c.seed, epoch);
      tokens += b.tgt_tokens;
      if (i % ranks != rank) continue;
      rows.push_back(b.src.size(0));
      batches.push_back(std::move(b));
    }
    StepResult r;
    try {
      r = trainer.step(rows, tokens, [&](nn::Module& m, size_t i, int64_t b0, int64_t b1) {
        const data::Batch& b = batches[i];
        const Tensor out = b.tgt_out.narrow(0, b0, b1 - b0);
        const Var logits = static_cast<nn::Transformer&>(m).forward(b.src.narrow(0, b0, b1 - b0),
                                                                     b.tgt_in.narrow(0, b0, b1 - b0));
        return ShardLoss{cross_entropy(logits, out, c.label_smoothing, data::kPadId), count_tokens(out)};
      });
    } catch (const NonFiniteError& e) {
      ROSETTA_FAIL(e.what(), c.on_nonfinite == "stop" ? " (--on-nonfinite stop); " : " (try a lower --lr or --clip); ",
                   kept());
    }
    interval_comm += r.allreduce_s;
    if (r.skipped) {
      say.info(concat("step ", p.step + 1, ": non-finite ", std::isfinite(r.loss) ? "gradient norm" : "loss", " (",
                      std::isfinite(r.loss) ? r.grad_norm : r.loss, "); update skipped (", trainer.skipped(),
                      " so far)"));
      continue;
    }
    ++p.step;
    ++interval_steps;
    last_norm = r.grad_norm;
    interval_loss += r.loss * double(tokens);
    interval_tokens += double(tokens);

    if (p.step % c.log_every == 0) {
      const double now = elapsed();
      const double loss = interval_loss / std::max(interval_tokens, 1.0);
      const double tps = interval_tokens / std::max(now - interval_time_start, 1e-9);
      MetricRecord record{{"kind", "train"}, {"step", p.step}, {"epoch", int64_t(it.epoch())}, {"loss", loss},
                          {"ppl", std::exp(loss)}, {"lr", opt->lr()}, {"grad_norm", last_norm},
                          {"tokens_per_s", tps}, {"elapsed_s", now}};
      std::string comm;
      if (ranks > 1) {
        const double ms = 1000 * interval_comm / double(std::max<int64_t>(interval_steps, 1));
        record.emplace_back("allreduce_ms", ms);
        comm = " (allreduce " + num("%.1f", ms) + " ms/step)";
      }
      write_metrics(record);
      if (hooks.progress) {
        if (root)
          hooks.progress(concat("step ", p.step, " | epoch ", it.epoch(), " | loss ", num("%.4f", loss), " | lr ",
                                num("%.2e", opt->lr()), " | ", num("%.0f", tps), " tok/s", comm, " | ",
                                num("%.0f", now), "s"));
      } else {
        say.info(concat("step ", p.step, " epoch ", it.epoch(), " loss ", num("%.4f", loss), " ppl ",
                        num("%.2f", std::exp(loss)), " lr ", num("%.3e", opt->lr()), " grad_norm ",
                        num("%.3f", last_norm), " ", num("%.0f", tps), " tok/s", comm));
      }
      interval_loss = interval_tokens = interval_comm = 0;
      interval_steps = 0;
      interval_time_start = now;
    }
    bool stop_early = false;
    if (c.validate_every > 0 && p.step % c.validate_every == 0) stop_early = group.any(do_validation());
    if (c.save_every > 0 && p.step % c.save_every == 0) save();
    if (stop_early) { outcome.stop_reason = "early-stopping"; break; }
    if (stop && group.any(stop->load())) { outcome.stop_reason = "interrupted"; break; }
  }
  if (outcome.stop_reason != "interrupted" && outcome.stop_reason != "early-stopping" &&
      (c.validate_every == 0 || p.step % c.validate_every != 0))
    do_validation();
  save();
  outcome.steps = p.step;
  outcome.best_valid = p.best_valid;
  outcome.root = root;
  if (ranks > 1)
    say.info(concat(ranks, " ranks; largest difference of a rank's parameters from rank 0's: ",
                    num("%g", replica_diff), replica_diff == 0 ? " (identical)" : " (resynchronized)"));
  say.info(concat("stopped at step ", p.step, " (", outcome.stop_reason, "); ", num("%.0f", elapsed()),
                  "s of training; checkpoint in ", run.checkpoint()));
  return outcome;
}

}  // namespace

// Data-parallel training (several ranks) is the single-process loop with three additions: every
// rank serves all batches from the shared data order but computes only its share, the gradient
// buffer is summed over the ranks before the update, and every decision to stop is agreed on.
// With one rank every collective is the identity and the run is the single-process run.
TrainOutcome train_translator(TrainConfig c, const std::string& config_toml, const RunHooks& hooks,
                              const std::atomic<bool>* stop) {
  // A build without MPI runs alone under a launcher of one process (e.g. srun), and refuses to
  // be one of several: each would train alone, all into the same directory.
  if (!mpi_built() && !c.distributed)
    ROSETTA_CHECK(launched_size() == 1, "started as one of ", launched_size(), " MPI processes, but this rosetta ",
                  "was built without MPI; rebuild with libopenmpi-dev installed (cmake -DROSETTA_MPI=ON)");
  const bool join = c.distributed || (mpi_built() && launched_by_mpi());
  const ProcessGroup group = join ? ProcessGroup::world() : ProcessGroup();
  try {
    return train_in(group, std::move(c), config_toml, hooks, stop);
  } catch (...) {
    group.fail();  // the other ranks may be waiting for this one: end the job
    throw;
  }
}

}  // namespace rosetta::translator
