#include "rosetta/translator/config.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "rosetta/core/check.h"

namespace rosetta::translator {

using rosetta::detail::concat;

std::string model_option_flag(const std::string& key) {
  if (key == "norm_first") return "--norm";
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

namespace {
void positive(const char* flag, int64_t v) { ROSETTA_CHECK(v > 0, "--", flag, " must be positive, got ", v); }
void non_negative(const char* flag, double v) {
  ROSETTA_CHECK(v >= 0 && std::isfinite(v), "--", flag, " must be a non-negative number, got ", v);
}

// A schedule that decays over the budget needs one, longer than its warm-up; a warm-up given as
// a share of the budget needs a budget in updates, which only the budget schedules estimate
// from --max-time.
void check_schedule_budget(const TrainConfig& c) {
  const TrainConfig::Warmup w = c.warmup_spec();
  ROSETTA_CHECK(c.decay_to >= 0 && c.decay_to <= 1, "--decay-to ", c.decay_to, " outside [0, 1]");
  if (c.budget_schedule()) {
    ROSETTA_CHECK(c.max_steps > 0 || c.max_time_seconds() > 0, "--schedule ", optim::schedule_kind_name(c.schedule),
                  " decays to --decay-to at the end of the budget: give --max-steps or --max-time");
    ROSETTA_CHECK(w.is_share || c.max_steps == 0 || w.updates < c.max_steps, "--max-steps ", c.max_steps,
                  " is no longer than the warm-up (--warmup ", w.updates, "): the ", optim::schedule_kind_name(c.schedule),
                  " schedule would never decay; give a shorter --warmup (or a share, e.g. 5%) or a larger --max-steps");
  } else {
    ROSETTA_CHECK(!w.is_share || c.max_steps > 0, "--warmup ", c.warmup,
                  " is a share of the budget's updates: with --schedule ", optim::schedule_kind_name(c.schedule),
                  " give --max-steps (linear and cosine also estimate the updates of --max-time)");
  }
}

}  // namespace

void TrainConfig::validate() const {
  positive("vocab-size", vocab_size);
  non_negative("max-src-len", double(max_src_len));
  non_negative("max-tgt-len", double(max_tgt_len));
  model.validate(model_option_flag);
  ROSETTA_CHECK(word_dropout >= 0 && word_dropout < 1, "--word-dropout ", word_dropout, " outside [0, 1)");
  positive("train-repeat", train_repeat);
  ROSETTA_CHECK(extra_max >= 0, "--extra-max must not be negative, got ", extra_max);
  ROSETTA_CHECK(sp_nbest >= 0 && sp_nbest <= 64, "--sp-nbest ", sp_nbest, " outside [0, 64]");
  non_negative("sp-alpha", sp_alpha);
  ROSETTA_CHECK(sp_nbest < 2 || tokenizer == data::TokenizerModel::unigram, "--sp-nbest ", sp_nbest,
                " needs --tokenizer unigram: a BPE model has one segmentation per sentence");
  ROSETTA_CHECK(ema >= 0 && ema < 1, "--ema ", ema, " outside [0, 1)");
  ROSETTA_CHECK(keep_checkpoints >= 0, "--keep-checkpoints must not be negative, got ", keep_checkpoints);
  ROSETTA_CHECK(valid_length_penalty >= 0 && valid_length_penalty <= 10, "--valid-length-penalty ", valid_length_penalty,
                " outside [0, 10] (as translate's --length-penalty)");
  ROSETTA_CHECK(best_metric == BestMetric::loss || valid_bleu_sentences > 0, "--best-metric ", best_metric_name(best_metric),
                " needs validation translations (--valid-bleu-sentences > 0)");
  ROSETTA_CHECK(label_smoothing >= 0 && label_smoothing < 1, "--label-smoothing ", label_smoothing,
                " outside [0, 1)");
  ROSETTA_CHECK(lr > 0 && std::isfinite(lr), "--lr must be positive, got ", lr);
  ROSETTA_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "--beta1/--beta2 outside [0, 1)");
  non_negative("eps", eps);
  non_negative("weight-decay", weight_decay);
  non_negative("momentum", momentum);
  non_negative("clip", clip);
  check_schedule_budget(*this);
  positive("max-tokens", max_tokens);
  // A batch holds at least one sequence of the longest length the model accepts.
  ROSETTA_CHECK(max_tokens >= model.max_len(), "--max-tokens ", max_tokens, " is smaller than --max-len ", model.max_len(),
                ": a batch must hold at least one sequence of the longest length");
  positive("accum", accum);
  ROSETTA_CHECK(max_steps >= 0 && max_epochs >= 0, "--max-steps and --max-epochs must not be negative");
  ROSETTA_CHECK(early_stopping >= -1, "--early-stopping ", early_stopping, " must be 0 or more (or -1: by the budget)");
  ROSETTA_CHECK(validate_every >= 0 && save_every >= 0 && valid_bleu_sentences >= 0,
                "--validate-every, --save-every and --valid-bleu-sentences must not be negative");
  positive("log-every", log_every);
  ROSETTA_CHECK(valid_beam >= 1 && valid_beam <= 64, "--valid-beam ", valid_beam, " outside [1, 64] (as translate's --beam)");
  ROSETTA_CHECK(threads >= 0 && threads <= 1024, "--threads ", threads, " outside [0, 1024] (0: the default)");
  ROSETTA_CHECK(replicas >= 0 && replicas <= 1024, "--replicas ", replicas, " outside [0, 1024]");
  ROSETTA_CHECK(precision != PrecisionChoice::int8,
                "--precision int8 is for decoding (translate, eval); training runs fp32, bf16 or auto");
  ROSETTA_CHECK(!model.share_embeddings() || joint_vocab || task == Task::copy,
                "--share-embeddings needs --joint-vocab");
  max_time_seconds();
  if (task == Task::copy) {
    positive("copy-symbols", copy_symbols);
    positive("copy-min-len", copy_min_len);
    ROSETTA_CHECK(copy_max_len >= copy_min_len, "--copy-max-len ", copy_max_len, " < --copy-min-len ",
                  copy_min_len);
    positive("copy-train-size", copy_train_size);
    positive("copy-valid-size", copy_valid_size);
    ROSETTA_CHECK(copy_max_len <= model.max_len() - 2, "--copy-max-len ", copy_max_len,
                  " does not fit --max-len ", model.max_len());
  } else {
    ROSETTA_CHECK(!train.empty() || (!src.empty() && !tgt.empty()),
                  "no training data: give --train FILE.tsv, or --src FILE --tgt FILE (or --task copy)");
    ROSETTA_CHECK(train.empty() || src.empty(), "give either --train or --src/--tgt, not both");
    ROSETTA_CHECK(src.empty() == tgt.empty(), "--src and --tgt go together");
    ROSETTA_CHECK(valid_src.empty() == valid_tgt.empty(), "--valid-src and --valid-tgt go together");
    // Sources enter the encoder as they are; targets get bos (decoder input) or eos (output).
    const int64_t max_len = model.max_len();
    ROSETTA_CHECK(src_limit() <= max_len, "--max-src-len ", max_src_len, " is longer than --max-len ", max_len);
    ROSETTA_CHECK(max_len >= 2 && tgt_limit() < max_len, "--max-tgt-len ", max_tgt_len, " does not fit --max-len ", max_len,
                  " (a target takes its length + 1 positions)");
  }
}

int64_t TrainConfig::early_stopping_validations() const {
  if (early_stopping >= 0) return early_stopping;
  return has_budget() ? 0 : kDefaultEarlyStopping;
}

double TrainConfig::max_time_seconds() const {
  if (max_time.empty()) return 0;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(max_time, &used);
  } catch (const std::exception&) {
    ROSETTA_FAIL("--max-time '", max_time, "' is not a duration (e.g. 900, 900s, 15m, 2h)");
  }
  const std::string unit = max_time.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  ROSETTA_CHECK(scale > 0 && v >= 0 && std::isfinite(v), "--max-time '", max_time,
                "' is not a duration (e.g. 900, 900s, 15m, 2h)");
  return v * scale;
}

TrainConfig::Warmup TrainConfig::warmup_spec() const {
  const std::string bad = concat("--warmup '", warmup, "' is neither a number of updates (e.g. 300) nor a share ",
                                 "of the budget's updates (e.g. 5%)");
  Warmup w;
  size_t used = 0;
  try {
    if (!warmup.empty() && warmup.back() == '%') {
      const double percent = std::stod(warmup, &used);
      ROSETTA_CHECK(used + 1 == warmup.size() && percent >= 0 && percent < 100, bad, ": a share is in [0%, 100%)");
      w.share = percent / 100;
      w.is_share = true;
    } else {
      w.updates = std::stoll(warmup, &used);
      ROSETTA_CHECK(used == warmup.size() && w.updates >= 0, bad);
    }
  } catch (const std::logic_error&) {  // std::stod's and std::stoll's invalid_argument, out_of_range
    ROSETTA_FAIL(bad);
  }
  return w;
}

nn::TransformerOptions TrainConfig::model_options(int64_t src_vocab, int64_t tgt_vocab) const {
  return nn::TransformerOptions(model)
      .src_vocab(src_vocab)
      .tgt_vocab(tgt_vocab)
      .share_embeddings(model.share_embeddings() && src_vocab == tgt_vocab);
}

}  // namespace rosetta::translator
