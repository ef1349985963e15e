#include "rosetta/train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "rosetta/autograd/functions.h"
#include "rosetta/optim/optim.h"

namespace rosetta::train {

namespace {

// ema = d * ema + (1 - d) * weights after update `step`, d = min(decay, (1 + step) / (10 + step)):
// early on the average forgets the initial weights fast.
void update_ema(Tensor& ema, const Tensor& weights, double decay, int64_t step) {
  const float d = float(std::min(decay, double(1 + step) / double(10 + step)));
  float* e = ema.data<float>();
  const float* w = weights.data<float>();
  const int64_t n = ema.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) e[i] = d * e[i] + (1 - d) * w[i];
}

}  // namespace

uint64_t rank_seed(uint64_t seed, int rank) {
  return rank == 0 ? seed : Generator(seed).hash(~uint64_t(rank));
}

Trainer::Trainer(nn::Module& model, optim::Optimizer& opt, TrainerOptions options,
                 ThreadReplicas::Factory make_replica, std::shared_ptr<const optim::Schedule> schedule,
                 ProcessGroup group)
    : model_(model),
      opt_(opt),
      options_(options),
      schedule_(std::move(schedule)),
      group_(group),
      replicas_(model, opt, options.replicas(), make_replica, options.replica_threads()),
      generators_(dropout_generators(model)) {
  ROSETTA_CHECK(options_.clip() >= 0, "Trainer: clip must be >= 0, not ", options_.clip());
  ROSETTA_CHECK(options_.ema() >= 0 && options_.ema() < 1, "Trainer: ema must be in [0, 1), not ", options_.ema());
  ROSETTA_CHECK(options_.max_skipped() > 0, "Trainer: max_skipped must be positive");
  for (Generator* g : generators_) g->set_state(rank_seed(g->seed(), group_.rank()), g->counter());
  // The same seed gives every rank the same weights; the root's are sent anyway, so that the
  // ranks start identical whatever the platform.
  if (group_.size() > 1) {
    group_.broadcast(opt_.flat_params().data<float>(), opt_.numel());
    opt_.flat_params().bump_version();
  }
  if (options_.ema() > 0) ema_ = opt_.flat_params().clone();
}

void Trainer::restore_progress(int64_t steps, int64_t skipped) {
  ROSETTA_CHECK(steps == opt_.steps(), "the checkpoint's step ", steps, " is not its optimizer's ", opt_.steps());
  steps_ = steps;
  skipped_ = skipped;
  skipped_in_a_row_ = 0;
}

double Trainer::run_shards(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss,
                           bool backward) {
  const double denominator = double(std::max<int64_t>(total_tokens, 1));
  double sum = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    // Each replica takes a shard of the batch's rows (one replica: the whole batch), weighted by
    // its share of the update's tokens; backward goes into the replica's own gradient buffer.
    std::vector<double> losses(size_t(replicas_.size()), 0.0);
    replicas_.run(rows[b], [&](int r, int64_t b0, int64_t b1) {
      std::optional<NoGradGuard> no_grad;  // per thread
      if (!backward) no_grad.emplace();
      const ShardLoss shard = loss(replicas_.model(r), b, b0, b1);
      const double w = double(shard.tokens) / denominator;
      losses[size_t(r)] = shard.loss.item() * w;
      if (backward) shard.loss.backward(Tensor::full(shard.loss.shape(), w));
    });
    for (double l : losses) sum += l;
  }
  return sum;
}

StepResult Trainer::step(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss) {
  StepResult result;
  result.tokens = total_tokens;
  double step_loss = run_shards(rows, total_tokens, loss, /*backward=*/true);
  replicas_.reduce_into(opt_);
  if (group_.size() > 1) {
    // The flat gradient buffer summed in place, after the backward pass, in buckets of 16 MiB
    // (ProcessGroup::sum says why). Overlapping buckets with the backward pass would need to
    // know when a parameter's gradient is complete, which autograd does not report; it would
    // pay only where the allreduce is a large share of an update (slow networks, big models):
    // on one machine 1M parameters (d_model 128) take ~0.5 ms and 5.5M (d_model 256) ~10 ms,
    // against ~0.3 s and ~5 s of compute per update (2 batches of 2048 and 4096 tokens, one
    // thread per rank).
    const auto c0 = std::chrono::steady_clock::now();
    group_.sum(opt_.flat_grads().data<float>(), opt_.numel());
    step_loss = group_.sum(step_loss);
    result.allreduce_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  }
  result.loss = step_loss;
  result.grad_norm = options_.clip() > 0 ? optim::clip_grad_norm(opt_, options_.clip()) : optim::grad_norm(opt_);
  if (!std::isfinite(step_loss) || !std::isfinite(result.grad_norm)) {
    opt_.zero_grad_lazily();
    ++skipped_;
    ++skipped_in_a_row_;
    result.skipped = true;
    if (options_.stop_on_nonfinite())
      throw NonFiniteError(std::string("non-finite ") + (std::isfinite(step_loss) ? "gradient" : "loss") +
                           " at step " + std::to_string(steps_ + 1) + "; stopped");
    if (skipped_in_a_row_ >= options_.max_skipped())
      throw NonFiniteError(std::to_string(options_.max_skipped()) +
                           " updates in a row skipped for non-finite values; stopped");
    return result;
  }
  skipped_in_a_row_ = 0;
  if (schedule_) opt_.set_lr(schedule_->lr(steps_ + 1));
  opt_.step();
  opt_.zero_grad_lazily();
  ++steps_;
  if (ema_.defined()) update_ema(ema_, opt_.flat_params(), options_.ema(), steps_);
  return result;
}

double Trainer::evaluate(const std::vector<int64_t>& rows, int64_t total_tokens, const LossFn& loss) {
  const bool was_training = model_.is_training();
  for (int r = 0; r < replicas_.size(); ++r) replicas_.model(r).train(false);
  double sum = 0;
  std::exception_ptr error;
  try {
    sum = run_shards(rows, total_tokens, loss, /*backward=*/false);
  } catch (...) {
    error = std::current_exception();
  }
  for (int r = 0; r < replicas_.size(); ++r) replicas_.model(r).train(was_training);
  if (error) std::rethrow_exception(error);
  return group_.size() > 1 ? group_.sum(sum) : sum;
}

float Trainer::synchronize() {
  if (group_.size() == 1) return 0;
  // Each rank's dropout position, for the checkpoint: left as it is, so that a checkpoint at any
  // update (a stop between two regular ones included) changes nothing of what follows.
  std::string mine;
  for (const Generator* g : generators_) {
    if (!mine.empty()) mine += ' ';
    mine += std::to_string(g->counter());
  }
  rank_counters_ = group_.gather(mine);
  const Tensor& params = opt_.flat_params();
  float* p = params.data<float>();
  std::vector<float> root(p, p + params.numel());
  group_.broadcast(root.data(), int64_t(root.size()));
  float diff = 0;
  for (size_t i = 0; i < root.size(); ++i) diff = std::max(diff, std::abs(p[i] - root[i]));
  if (diff > 0) {
    std::copy(root.begin(), root.end(), p);
    params.bump_version();
  }
  return group_.max(diff);
}

EmaWeights::EmaWeights(const Trainer& trainer) : flat_(trainer.optimizer().flat_params()) {
  if (!trainer.ema().defined()) return;
  saved_ = flat_.clone();
  flat_.copy_(trainer.ema());
  flat_.bump_version();
}

EmaWeights::~EmaWeights() {
  if (!saved_.defined()) return;
  flat_.copy_(saved_);
  flat_.bump_version();
}

}  // namespace rosetta::train
