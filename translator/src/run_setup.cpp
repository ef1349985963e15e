#include "run_steps.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/io.h"
#include "rosetta/core/ops.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/resources.h"
#include "rosetta/translator/memory_plan.h"

namespace rosetta::translator::detail {

namespace fs = std::filesystem;

using rosetta::detail::concat;
using rosetta::detail::num;
using train::format_size;
using train::ProcessGroup;

namespace {

// The configuration as the run uses it: --resume DIR is the run directory; every value checked.
TrainConfig checked(TrainConfig c) {
  if (!c.resume.empty()) c.out = c.resume;
  c.validate();
  return c;
}

// Threads of each rank: --threads, else OMP_NUM_THREADS, else this machine's cores shared by the
// ranks on it (so `mpirun -np 2` on 8 cores runs 2 x 4 threads, not 2 x 8).
int threads_for(const TrainConfig& c, const ProcessGroup& group) {
  if (c.threads > 0 || group.size() == 1 || std::getenv("OMP_NUM_THREADS")) return c.threads;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(get_num_threads(), cores / group.local_size()));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, std::vector<Var> params) {
  if (c.optimizer == OptimizerKind::sgd) {
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
  o.decoupled = c.optimizer == OptimizerKind::adamw;
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

}  // namespace

TrainingRun::TrainingRun(const ProcessGroup& group, TrainConfig config, const RunHooks& hooks,
                         const std::atomic<bool>* stop)
    : group_(group),
      root_(group.is_root()),
      say_{hooks, root_},
      hooks_(hooks),
      stop_(stop),
      c_(checked(std::move(config))),
      run_(c_.out),
      lock_(root_ ? run_.dir : "", c_.resume.empty()) {
  if (!lock_.warning().empty()) say_.warn(lock_.warning());
}

void TrainingRun::plan() {
  // --resume of a run stopped before its first checkpoint starts it over from its config.toml.
  resuming_ = !c_.resume.empty() && group_.any(root_ && (fs::exists(run_.checkpoint()) ||
                                                          fs::exists(train::previous_checkpoint(run_.checkpoint()))));
  restart_ = !c_.resume.empty() && !resuming_;
  set_num_threads(threads_for(c_, group_));
  thread_plan_ = train::thread_plan_for_flag(c_.replicas, c_.max_tokens, c_.model.d_model());
  if (root_) check_run_dir(run_, resuming_, restart_);
  if (root_) train::MemoryBudget(c_.memory_limit).check(training_plan(c_, thread_plan_.replicas, group_.local_size()));
}

void TrainingRun::read_data() {
  if (c_.task == Task::copy) make_copy_task(c_, d_);
  else load_text_data(c_, run_, resuming_, group_, d_);
}

void TrainingRun::open_run_dir(const std::string& config_toml) {
  if (root_) {
    prepare_run_dir(run_);
    if (hooks_.run_dir_ready) hooks_.run_dir_ready(run_);
  }
  if (restart_ && root_) say_.warn(run_.dir + " holds no checkpoint yet: starting the run over from its config.toml");
  say_.info(concat(resuming_ ? "resuming" : "starting", " run in ", run_.dir, " (", get_num_threads(),
                   get_num_threads() == 1 ? " thread" : " threads", ", BLAS ", blas_core_name(), ")"));
  std::string precision_note;
  precision_.emplace(resolve_precision(c_.precision, &precision_note));
  if (!precision_note.empty()) say_.info(precision_note);
  if (const std::string w = blas_kernels_warning(); !w.empty()) say_.warn(w);
  say_.info(kernels_line());
  if (group_.size() > 1)
    say_.info(concat("data-parallel over ", group_.size(), " processes (", group_.local_size(), " on this machine, ",
                     get_num_threads(), " threads each): an update takes ", group_.size(), " x ", c_.accum,
                     " batches"));
  if (root_ && !resuming_) {
    if (!config_toml.empty()) write_file_atomic(run_.config(), config_toml);
    write_tokenizers(run_, d_);
    write_file_atomic(run_.metrics(), "");  // a fresh run's metrics start empty
    write_file_atomic(run_.translations(), "");
  }
  for (const std::string& note : d_.notes) say_.info(note);
  say_.info(concat("data: ", d_.train.size(), " training pairs, ", d_.valid.size(), " validation pairs"));
}

void TrainingRun::build() {
  Generator init(c_.seed);
  model_options_ = c_.model_options(d_.codec.src_vocab(), d_.codec.tgt_vocab());
  model_ = std::make_unique<nn::Transformer>(model_options_, init);
  model_->train();
  opt_ = make_optimizer(c_, model_->parameters());
  schedule_ = make_run_schedule();
  // Replicas 1..n-1 are tied to the model's weights (train/replicas.h): their weights follow
  // the model's through resume and broadcast, since both write the shared values in place.
  const int replicas = thread_plan_.replicas;
  trainer_ = std::make_unique<train::Trainer>(*model_, *opt_,
                                              train::TrainerOptions()
                                                  .replicas(replicas)
                                                  .replica_threads(thread_plan_.inner_threads)
                                                  .clip(c_.clip)
                                                  .stop_on_nonfinite(c_.on_nonfinite == OnNonfinite::stop)
                                                  .ema(c_.ema),
                                              [options = model_options_] {
                                                Generator g(0);  // its weights and random state give way to the model's
                                                return std::make_unique<nn::Transformer>(options, g);
                                              },
                                              schedule_, group_);
  if (replicas > 1 && thread_plan_.inner_threads == 1)
    say_.info(concat(replicas, " model replicas, one per thread, each train a shard of every batch (--replicas)"));
  else if (replicas > 1)
    say_.info(concat(replicas, " model replicas, each train a shard of every batch on ", thread_plan_.inner_threads,
                     " threads in its bf16 products (--replicas)"));
  it_ = std::make_unique<data::BatchIterator>(d_.train,
                                              data::BatchOptions().max_tokens(size_t(c_.max_tokens)).seed(c_.seed));
  if (d_.sampler) it_->set_resampler([this](uint64_t epoch) { return d_.sampler->sample(c_.seed, epoch); });
}

void TrainingRun::restore() {
  if (!resuming_) return;
  // The newest checkpoint that loads: one that does not is set aside, with a warning.
  const train::CheckpointFallback from = train::load_with_fallback(
      run_.checkpoint(), [&](const std::string& path) { p_ = load_checkpoint(path, run_, c_, d_, *trainer_, *it_); });
  if (!from.skipped.empty()) {
    const std::string aside = root_ ? train::set_aside_checkpoint(run_.checkpoint()) : "";
    if (root_) say_.warn(concat(from.skipped[0], "; resuming from the checkpoint before it, ", from.path,
                                aside.empty() ? "" : ", and keeping the skipped one as " + aside));
  }
  saved_step_ = p_.step;
  restore_budget();
  if (root_) truncate_metrics(run_, p_.step);
  say_.info(concat("resumed at step ", p_.step, " (epoch ", it_->epoch(), ", batch ", it_->position(), ")"));
}

void TrainingRun::describe() {
  const int64_t n = model_->parameter_count();
  const double opt_bytes = double(opt_->state_tensors().size()) * 4.0 * double(n);
  const size_t act = measure_batch_memory(*model_, *opt_, *it_, c_);
  say_.info(concat("model: ", n, " parameters (", format_size(4.0 * double(n)), "); gradients ",
                   format_size(4.0 * double(n)), "; optimizer state ", format_size(opt_bytes), " (", opt_->name(),
                   "); largest batch's activations ", format_size(double(act))));
  const auto [src_pad, tgt_pad] = padding_share(*it_);
  const std::string estimated = budget_ && c_.max_time_seconds() > 0
                                    ? " (the budget's updates estimated every --log-every updates from the speed)"
                                    : "";
  say_.info(concat("schedule: ", schedule_->describe(), estimated, "; ", it_->batches_in_epoch(),
                   " batches per epoch, padding ", num("%.1f", 100 * src_pad), "% of source and ",
                   num("%.1f", 100 * tgt_pad), "% of target positions"));
}

}  // namespace rosetta::translator::detail
