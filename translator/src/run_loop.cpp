#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/check.h"
#include "rosetta/data/noise.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/resources.h"
#include "run_steps.h"

namespace rosetta::translator::detail {

namespace fs = std::filesystem;

using rosetta::detail::concat;
using rosetta::detail::num;
using train::EmaWeights;
using train::MetricRecord;
using train::ProcessGroup;

namespace {

// Target tokens (non-pad entries) of a shard of a batch's tgt_out.
int64_t count_tokens(const Tensor& tgt_out) {
  const Tensor ids = tgt_out.contiguous();
  const int32_t* p = ids.data<int32_t>();
  int64_t k = 0;
  for (int64_t i = 0; i < ids.numel(); ++i) k += p[i] != data::kPadId;
  return k;
}

// The validation scores of `model` (loss on every pair; BLEU, chrF and exact matches of the
// first --valid-bleu-sentences, translated as --valid-beam and --valid-length-penalty say).
TranslationScores scores(nn::Transformer& model, const RunData& d, const TrainConfig& c, const ProcessGroup& group) {
  const auto search = nn::SearchOptions().beam(c.valid_beam).length_penalty(c.valid_length_penalty);
  return validate_translation(model, d.codec, d.valid, d.valid_text, c.max_tokens, size_t(c.valid_bleu_sentences),
                              search, kSampleSentences, group);
}

// Every rank gets the root's BLEU and chrF (the others hold NaN), so that all apply the same
// selection and early-stopping rule.
void share_scores(const ProcessGroup& group, TranslationScores& r) {
  if (group.size() == 1) return;
  double scores[2] = {group.is_root() ? r.bleu : 0.0, group.is_root() ? r.chrf : 0.0};
  group.sum(scores, 2);
  r.bleu = scores[0];
  r.chrf = scores[1];
}

// While alive, the model's weights (the optimizer's flat parameters) may be replaced; then the
// ones it found come back, bit for bit, however the scope ends.
class RestoredWeights {
 public:
  explicit RestoredWeights(Tensor flat) : flat_(std::move(flat)), saved_(flat_.clone()) {}
  ~RestoredWeights() { flat_.copy_(saved_); }
  RestoredWeights(const RestoredWeights&) = delete;
  RestoredWeights& operator=(const RestoredWeights&) = delete;

 private:
  Tensor flat_, saved_;
};

}  // namespace

// ------------------------------------------------------------------ the loop

StopReason TrainingRun::loop() {
  if (root_) metrics_.emplace(run_.metrics());
  max_time_ = c_.max_time_seconds();
  t0_ = std::chrono::steady_clock::now();
  interval_.start = elapsed();
  early_estimates_ = budget_ && budget_->state().total == 0;
  while (true) {
    if (const std::optional<StopReason> rule = stopping_rule()) {
      if (*rule == StopReason::max_time) refuse_unmeasured_warmup();
      return *rule;
    }
    if (!update()) continue;
    if (rebudget_due()) rebudget();
    if (p_.step % c_.log_every == 0) log_interval();
    bool stop_early = false;
    if (c_.validate_every > 0 && p_.step % c_.validate_every == 0) stop_early = group_.any(validate());
    if (c_.save_every > 0 && p_.step % c_.save_every == 0) save();
    if (stop_early) return StopReason::early_stopping;
    if (stop_ && group_.any(stop_->load())) return StopReason::interrupted;
  }
}

std::optional<StopReason> TrainingRun::stopping_rule() const {
  if (c_.max_steps > 0 && p_.step >= c_.max_steps) return StopReason::max_steps;
  if (c_.max_epochs > 0 && int64_t(it_->epoch()) >= c_.max_epochs) return StopReason::max_epochs;
  if (max_time_ > 0 && group_.any(elapsed() >= max_time_)) return StopReason::max_time;
  return std::nullopt;
}

// The global batch of an update is the next ranks x accum batches of the data order, which every
// rank serves; rank r computes every ranks-th from the r-th. Each batch's loss is weighted by its
// share of the global batch's tokens, so the gradients summed over the ranks are the gradient of
// the global batch: the update one process makes with --accum ranks x accum.
int64_t TrainingRun::next_batches(std::vector<data::Batch>& batches, std::vector<int64_t>& rows) {
  const int64_t ranks = group_.size(), rank = group_.rank();
  int64_t tokens = 0;
  for (int64_t i = 0; i < ranks * c_.accum; ++i) {
    const uint64_t epoch = it_->epoch();
    data::Batch b = it_->next();
    if (c_.word_dropout > 0) data::word_dropout(b, c_.word_dropout, c_.word_dropout, c_.seed, epoch);
    tokens += b.tgt_tokens;
    if (i % ranks != rank) continue;
    rows.push_back(b.src.size(0));
    batches.push_back(std::move(b));
  }
  return tokens;
}

bool TrainingRun::update() {
  std::vector<data::Batch> batches;
  std::vector<int64_t> rows;
  const int64_t tokens = next_batches(batches, rows);
  train::StepResult r;
  try {
    r = trainer_->step(rows, tokens, [&](nn::Module& m, size_t i, int64_t b0, int64_t b1) {
      const data::Batch& b = batches[i];
      const Tensor out = b.tgt_out.narrow(0, b0, b1 - b0);
      const Var loss = static_cast<nn::Transformer&>(m).loss(b.src.narrow(0, b0, b1 - b0), b.tgt_in.narrow(0, b0, b1 - b0),
                                                              out, c_.label_smoothing, data::kPadId);
      return train::ShardLoss{loss, count_tokens(out)};
    });
  } catch (const train::NonFiniteError& e) {
    ROSETTA_FAIL(e.what(), c_.on_nonfinite == OnNonfinite::stop ? " (--on-nonfinite stop); " : " (try a lower --lr or --clip); ",
                 what_is_kept());
  }
  interval_.comm += r.allreduce_s;
  if (r.skipped) {
    say_.info(concat("step ", p_.step + 1, ": non-finite ", std::isfinite(r.loss) ? "gradient norm" : "loss", " (",
                     std::isfinite(r.loss) ? r.grad_norm : r.loss, "); update skipped (", trainer_->skipped(),
                     " so far)"));
    return false;
  }
  ++p_.step;
  if (++process_steps_ == 1) t1_ = std::chrono::steady_clock::now();
  ++interval_.steps;
  last_norm_ = r.grad_norm;
  interval_.tokens += double(tokens);
  p_.unlogged_loss += r.loss * double(tokens);
  p_.unlogged_tokens += double(tokens);
  return true;
}

void TrainingRun::log_interval() {
  const double now = elapsed();
  const double loss = p_.unlogged_loss / std::max(p_.unlogged_tokens, 1.0);
  const double tps = interval_.tokens / std::max(now - interval_.start, 1e-9);
  const double lr = opt_->lr();
  MetricRecord record{{"kind", "train"}, {"step", p_.step}, {"epoch", int64_t(it_->epoch())}, {"loss", loss},
                      {"ppl", std::exp(loss)}, {"lr", lr}, {"grad_norm", last_norm_},
                      {"tokens_per_s", tps}, {"elapsed_s", now}};
  // A time budget's latest estimate of its updates (run_budget.cpp).
  if (budget_ && max_time_ > 0) record.emplace_back("budget_steps", budget_->state().total);
  std::string comm;
  if (group_.size() > 1) {
    const double ms = 1000 * interval_.comm / double(std::max<int64_t>(interval_.steps, 1));
    record.emplace_back("allreduce_ms", ms);
    comm = " (allreduce " + num("%.1f", ms) + " ms/step)";
  }
  if (metrics_) metrics_->write(record);
  if (hooks_.progress) {
    if (root_)
      hooks_.progress(concat("step ", p_.step, " | epoch ", it_->epoch(), " | loss ", num("%.4f", loss), " | lr ",
                             num("%.2e", lr), " | ", num("%.0f", tps), " tok/s", comm, " | ", num("%.0f", now), "s"));
  } else {
    say_.info(concat("step ", p_.step, " epoch ", it_->epoch(), " loss ", num("%.4f", loss), " ppl ",
                     num("%.2f", std::exp(loss)), " lr ", num("%.3e", lr), " grad_norm ", num("%.3f", last_norm_),
                     " ", num("%.0f", tps), " tok/s", comm));
  }
  interval_ = Interval{};
  interval_.start = now;
  p_.unlogged_loss = p_.unlogged_tokens = 0;
}

// ------------------------------------------------------------------ validation and checkpoints

bool TrainingRun::validate(bool trained) {
  const bool average = !trained && trainer_->ema().defined();
  std::optional<EmaWeights> swap;  // with --ema, the average is what is validated and kept
  if (average) swap.emplace(*trainer_);
  TranslationScores v = scores(*model_, d_, c_, group_);
  if (std::isnan(v.loss)) return false;
  share_scores(group_, v);
  if (metrics_)
    metrics_->write({{"kind", trained ? "valid_trained" : "valid"}, {"step", p_.step}, {"loss", v.loss},
                     {"ppl", std::exp(v.loss)}, {"bleu", v.bleu}, {"chrf", v.chrf}, {"exact", v.exact},
                     {"elapsed_s", elapsed()}});
  const bool by_loss = c_.best_metric == BestMetric::loss;
  const double value = by_loss ? v.loss : c_.best_metric == BestMetric::bleu ? v.bleu : v.chrf;
  const bool improved = !std::isnan(value) && (std::isnan(p_.best_valid) ||
                                               (by_loss ? value < p_.best_valid : value > p_.best_valid));
  // BLEU and chrF are NaN where no sentences are decoded (--valid-bleu-sentences 0): not shown.
  say_.info(concat("valid step ", p_.step, trained ? " (trained weights, not the EMA)" : "", ": loss ",
                   num("%.4f", v.loss), " ppl ", num("%.2f", std::exp(v.loss)),
                   std::isnan(v.bleu) ? "" : " BLEU " + num("%.2f", v.bleu) + " chrF " + num("%.2f", v.chrf),
                   improved ? concat(" (best ", best_metric_name(c_.best_metric), ")") : ""));
  if (improved) {
    p_.best_valid = value;
    if (!trained) p_.bad_validations = 0;
    if (!(trained && final_choice())) keep_best(v, average ? "ema" : "trained");  // else choose_final's
  } else if (!trained) {
    ++p_.bad_validations;
  }
  if (trained) return false;  // the end of the run: no hook (it follows the EMA's validations), no early stop
  if (root_ && hooks_.validated) {  // e.g. a report that follows the run; it never stops training
    try {
      hooks_.validated(run_, p_.step, v);
    } catch (const std::exception& e) {
      say_.warn(e.what());
    }
  }
  const int64_t patience = c_.early_stopping_validations();
  return patience > 0 && p_.bad_validations >= patience;
}

void TrainingRun::save() {
  replica_diff_ = std::max(replica_diff_, trainer_->synchronize());
  if (budget_) p_.schedule = budget_->state();
  if (!root_) return;
  train::keeping_last_checkpoint(run_.checkpoint(), [&] {  // a full disk: the error says what is kept
    // The newest two steps' checkpoints are kept, for a resume to fall back on the older; a
    // second save at one step (the last) replaces the newest.
    const auto keep = p_.step != saved_step_ ? train::KeepPrevious::yes : train::KeepPrevious::no;
    save_checkpoint(run_, c_, d_, *trainer_, *it_, p_, elapsed(), keep);
    saved_step_ = p_.step;
    if (c_.keep_checkpoints > 0) {
      save_weights(run_.snapshot(p_.step), c_, *model_, d_, p_.step);
      prune_snapshots(run_, c_.keep_checkpoints);
    }
    if (trainer_->ema().defined()) {
      const EmaWeights swap(*trainer_);
      save_weights(run_.ema(), c_, *model_, d_, p_.step, {{"train.ema", to_str(c_.ema)}});
    }
  });
}

// ------------------------------------------------------------------ the end

TrainOutcome TrainingRun::finish(StopReason stop_reason) {
  const bool ended = stop_reason != StopReason::interrupted && stop_reason != StopReason::early_stopping;
  if (ended && (c_.validate_every == 0 || p_.step % c_.validate_every != 0)) validate();
  // The moving average lags the weights by ~1 / (1 - decay) updates; where the rate has decayed
  // to (near) zero at the end of a budget, the trained weights are themselves an average of the
  // last updates and often the better one (docs/results/recipes.md): both are validated at the end
  // and best.safetensors keeps the better.
  if (ended && trainer_->ema().defined()) validate(/*trained=*/true);
  if (ended && final_choice()) choose_final();
  save();
  TrainOutcome outcome;
  outcome.stop_reason = stop_reason;
  outcome.steps = p_.step;
  outcome.best_valid = p_.best_valid;
  outcome.root = root_;
  if (group_.size() > 1)
    say_.info(concat(group_.size(), " ranks; largest difference of a rank's parameters from rank 0's: ",
                     num("%g", replica_diff_), replica_diff_ == 0 ? " (identical)" : " (resynchronized)"));
  say_.info(concat("stopped at step ", p_.step, " (", stop_reason_name(stop_reason), "); ", num("%.0f", elapsed()),
                   "s of training; checkpoint in ", run_.checkpoint()));
  return outcome;
}

bool TrainingRun::final_choice() const {
  return trainer_->ema().defined() && c_.best_metric != BestMetric::loss && !d_.valid_text.empty();
}

void TrainingRun::choose_final() {
  // Whether best.safetensors exists (a run resumed after its last validation may have none
  // yet): the root's word, on every rank. Its answer also waits for the root's last save.
  if (!group_.any(root_ && fs::exists(run_.best()))) return;
  const bool by_bleu = c_.best_metric == BestMetric::bleu;
  const auto search = nn::SearchOptions().beam(kDefaultBeam);
  const auto score = [&] {
    TranslationScores v = validate_translation(*model_, d_.codec, d_.valid, d_.valid_text, c_.max_tokens,
                                               d_.valid_text.size(), search, 0, group_);
    share_scores(group_, v);
    return v;
  };
  const TranslationScores trained = score();
  // The kept weights in the model meanwhile (read by the root, sent to the others), then the
  // trained ones again, bit for bit. A best.safetensors that does not load leaves the choice as
  // it was (the run's last checkpoint still to be saved).
  int64_t kept_step = -1;  // unknown
  std::string kept_weights = "ema", unreadable;
  TranslationScores kept;
  {
    const RestoredWeights restored(opt_->flat_params());
    if (root_) {
      try {
        const auto meta = train::load_model_weights(*model_, run_.best());
        if (auto it = meta.find("train.step"); it != meta.end())
          std::from_chars(it->second.data(), it->second.data() + it->second.size(), kept_step);
        if (auto it = meta.find("valid.weights"); it != meta.end()) kept_weights = it->second;
      } catch (const std::exception& e) {
        unreadable = e.what();
      }
    }
    if (group_.any(!unreadable.empty())) {
      say_.warn(concat("the best weights were not chosen again on all validation pairs: ", unreadable));
      return;
    }
    Tensor flat = opt_->flat_params();
    group_.broadcast(flat.data<float>(), flat.numel());
    flat.bump_version();
    kept = score();
  }
  const double a = by_bleu ? kept.bleu : kept.chrf, b = by_bleu ? trained.bleu : trained.chrf;
  const bool switch_to_trained = b > a;
  const std::string what = concat(kept_weights == "trained" ? "the trained weights" : "the EMA",
                                  kept_step < 0 ? "" : concat(" of step ", kept_step));
  if (metrics_)
    metrics_->write({{"kind", "final_choice"}, {"step", p_.step}, {"sentences", int64_t(d_.valid_text.size())},
                     {"beam", int64_t(kDefaultBeam)}, {"kept_step", kept_step}, {"kept_bleu", kept.bleu},
                     {"kept_chrf", kept.chrf}, {"trained_bleu", trained.bleu}, {"trained_chrf", trained.chrf},
                     {"chosen", switch_to_trained ? "trained" : "kept"}});
  say_.info(concat("best weights chosen on all ", d_.valid_text.size(), " validation pairs (beam ", kDefaultBeam,
                   ", as rosetta eval): ", what, " ", best_metric_name(c_.best_metric), " ", num("%.2f", a), ", the trained weights of step ",
                   p_.step, " ", num("%.2f", b), ": best.safetensors ",
                   switch_to_trained ? "holds the trained weights" : "keeps " + what));
  if (switch_to_trained)
    keep_best(trained, "trained",
              {{"valid.chosen_on", concat("all ", d_.valid_text.size(), " validation pairs, beam ", kDefaultBeam)}});
}

void TrainingRun::keep_best(const TranslationScores& v, const std::string& whose,
                            std::map<std::string, std::string> extra) {
  if (!root_) return;
  extra.insert({{"valid.loss", to_str(v.loss)},
                {"valid.bleu", to_str(v.bleu)},
                {"valid.chrf", to_str(v.chrf)},
                {"valid.weights", whose}});
  train::keeping_last_checkpoint(run_.checkpoint(),
                                 [&] { save_weights(run_.best(), c_, *model_, d_, p_.step, extra); });
}

double TrainingRun::elapsed() const {
  return p_.elapsed + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string TrainingRun::what_is_kept() const {
  if (!root_) return "rank 0 keeps its last checkpoint";
  return fs::exists(run_.checkpoint()) ? "the last checkpoint in " + run_.dir + " is intact"
                                       : "no checkpoint was written yet";
}

}  // namespace rosetta::translator::detail
