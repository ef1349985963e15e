// The configuration of a run of train_translator (run.h): data, tokenizer, model, optimizer,
// stopping, run. Every field is a `rosetta train` flag of the same name (--d-model, --max-tokens,
// ...); validation messages name the fields that way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/core/enum_names.h"
#include "rosetta/data/tokenizer.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/optim/schedule.h"

namespace rosetta::translator {

// The options that take one of a few words, each an enum with its words (enum_names): parsed by
// parse_enum<E> or the parse_* below, written by enum_name or the *_name below. The others are
// nn::Activation (--activation), data::TokenizerModel (--tokenizer), optim::ScheduleKind
// (--schedule) and PrecisionChoice (--precision).
enum class Task { translate, copy };
constexpr EnumNames<Task, 2> enum_names(Task) {
  return {"task", {{{Task::translate, "translate"}, {Task::copy, "copy"}}}};
}
inline Task parse_task(const std::string& s) { return parse_enum<Task>(s); }
inline const char* task_name(Task t) { return enum_name(t); }

// --recipe (recipe.h): none, auto (chosen by the budget), small or large.
enum class RecipeChoice { none, automatic, small, large };
constexpr EnumNames<RecipeChoice, 4> enum_names(RecipeChoice) {
  return {"recipe",
          {{{RecipeChoice::none, "none"}, {RecipeChoice::automatic, "auto"}, {RecipeChoice::small, "small"},
            {RecipeChoice::large, "large"}}}};
}
inline RecipeChoice parse_recipe_choice(const std::string& s) { return parse_enum<RecipeChoice>(s); }
inline const char* recipe_choice_name(RecipeChoice r) { return enum_name(r); }

enum class OptimizerKind { adam, adamw, sgd };
constexpr EnumNames<OptimizerKind, 3> enum_names(OptimizerKind) {
  return {"optimizer", {{{OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}, {OptimizerKind::sgd, "sgd"}}}};
}
inline OptimizerKind parse_optimizer_kind(const std::string& s) { return parse_enum<OptimizerKind>(s); }
inline const char* optimizer_kind_name(OptimizerKind o) { return enum_name(o); }

// What best.safetensors and early stopping go by: the validation loss (lowest), BLEU or chrF
// (highest); also what `rosetta sweep --select` selects by.
enum class BestMetric { loss, bleu, chrf };
constexpr EnumNames<BestMetric, 3> enum_names(BestMetric) {
  return {"metric", {{{BestMetric::loss, "loss"}, {BestMetric::bleu, "bleu"}, {BestMetric::chrf, "chrf"}}}};
}
inline BestMetric parse_best_metric(const std::string& s) { return parse_enum<BestMetric>(s); }
inline const char* best_metric_name(BestMetric m) { return enum_name(m); }

// A non-finite loss or gradient: skip the update (too many in a row stop the run), or stop.
enum class OnNonfinite { skip, stop };
constexpr EnumNames<OnNonfinite, 2> enum_names(OnNonfinite) {
  return {"non-finite policy", {{{OnNonfinite::skip, "skip"}, {OnNonfinite::stop, "stop"}}}};
}
inline OnNonfinite parse_on_nonfinite(const std::string& s) { return parse_enum<OnNonfinite>(s); }
inline const char* on_nonfinite_name(OnNonfinite o) { return enum_name(o); }

// The defaults: a pre-norm Transformer (d_model 256, 4 heads, FF 1024, 2+2 layers, dropout 0.1,
// shared and tied embeddings over a joint 5,000-piece vocabulary) trained with Adam at 2e-3,
// inverse-square-root schedule, label smoothing 0.1, with an EMA of the weights. Chosen on the
// validation set at the updates 13 minutes give on 2 cores (docs/results/recipes.md): 2+2 layers
// beat 3+3 (more updates in the budget), 2e-3 beat 1e-3 and 3e-3. The regularization that pays
// depends on how often a run sees its corpus: these defaults are the recipe's for 12-16 passes, and `--recipe
// auto` (which `rosetta train` takes for a budget without model options) sets it by the passes the
// budget gives (recipe.h).
// A run without a budget stops after this many validations without improvement, unless
// --early-stopping says otherwise: 2,000 updates at the default --validate-every, long enough for
// a noisy validation BLEU to rise again.
inline constexpr int64_t kDefaultEarlyStopping = 10;

struct TrainConfig {
  // data
  Task task = Task::translate;
  std::string train, valid;        // TSV files (source<TAB>target)
  std::string src, tgt;            // or line-aligned training files
  std::string valid_src, valid_tgt;
  std::string out;     // run directory
  std::string resume;  // run directory to continue
  // tokenizer
  int vocab_size = 5000;
  bool joint_vocab = true;
  data::TokenizerModel tokenizer = data::TokenizerModel::unigram;
  // Pairs longer (in tokens) are filtered out; 0: as long as --max-len allows (src_limit()).
  int64_t max_src_len = 0;
  int64_t max_tgt_len = 0;
  // more data and training-side noise (low-resource levers)
  int64_t train_repeat = 1;  // each sentence pair appears this many times per epoch
  std::string extra_train;   // TSV of extra pairs (e.g. the dictionary's phrases.tsv)
  int64_t extra_max = 0;     // at most this many extra pairs, a sample fixed by the seed (0: all)
  bool extra_tag = true;     // sources of extra pairs start with a tag token
  double word_dropout = 0;   // source and decoder-input tokens replaced by unk
  int sp_nbest = 0;          // subword regularization: sample among the n-best segmentations (< 2: off)
  double sp_alpha = 0.2;     // its smoothing: P(segmentation) ~ exp(alpha * log-probability)
  // A recipe (recipe.h): small | large | auto (chosen by the updates the budget gives) sets the
  // model, optimisation and regularization options not given otherwise; none: the options alone.
  // `rosetta train` resolves it before the run and saves the values it set in config.toml; where
  // it is not given, it takes auto for a run with a budget and no model or regularization option
  // given (recipe_by_default, recipe.h). A library caller's TrainConfig keeps none.
  RecipeChoice recipe = RecipeChoice::none;
  // model: a flag for each option of nn::TransformerOptions (--d-model, --heads, ...; --norm
  // pre|post for norm_first) but those the data sets (the vocabularies, pad_id) and
  // layer_norm_eps.
  nn::TransformerOptions model = nn::TransformerOptions()
                                     .d_model(256)
                                     .heads(4)
                                     .ff(1024)
                                     .encoder_layers(2)
                                     .decoder_layers(2)
                                     .dropout(0.1)  // --recipe sets it by the passes (see above)
                                     .share_embeddings(true)  // needs joint_vocab
                                     .tie_output(true)
                                     .max_len(256);
  // objective, optimizer, schedule
  double label_smoothing = 0.1;
  OptimizerKind optimizer = OptimizerKind::adam;
  double lr = 2e-3;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9, weight_decay = 0.0, momentum = 0.9;
  // linear and cosine decay to `decay_to` x lr at the end of the budget: --max-steps, or the
  // updates --max-time allows, estimated from the speed measured as the run goes (run_budget.cpp).
  optim::ScheduleKind schedule = optim::ScheduleKind::inverse_sqrt;
  // Updates ("300"), or a share of the budget's updates ("5%"); a string for the share, which
  // --dump-config writes as it was given (a number unquoted, as before).
  std::string warmup = "300";
  double decay_to = 0;  // linear and cosine: the rate at the end of the budget, as a share of lr
  int64_t max_tokens = 2500;  // token budget per batch
  int64_t accum = 1;          // batches per update
  double clip = 1.0;          // global gradient-norm clip (0 = off)
  // stopping
  int64_t max_steps = 0;   // 0 = no limit
  int64_t max_epochs = 0;  // 0 = no limit
  std::string max_time;    // e.g. 900, 900s, 15m, 1h ("" = no limit)
  // Validations without improvement of best_metric before the run stops (0 = off; -1, the
  // default: early_stopping_validations()).
  int64_t early_stopping = -1;
  BestMetric best_metric = BestMetric::loss;  // best.safetensors and early stopping by
  // weights
  double ema = 0.999;            // decay of an exponential moving average of the weights (0 = off)
  int64_t keep_checkpoints = 0;  // weight snapshots step-N.safetensors kept (for rosetta average)
  // run
  uint64_t seed = 1;
  int threads = 0;  // 0 = OMP default
  int replicas = 0;  // model replicas training shards of each batch, one per thread (0 = automatic)
  // Of matrix products: fp32, bf16 or auto (bf16 where the CPU's bf16 products are fast: auto_precision).
  PrecisionChoice precision = PrecisionChoice::automatic;
  std::string memory_limit;  // e.g. 2G: the memory the run may use ("" = what is available, detected)
  int64_t validate_every = 200, save_every = 200, log_every = 50;
  int64_t valid_bleu_sentences = 300;  // valid sentences translated for BLEU/chrF (0 = none)
  int valid_beam = 1;
  double valid_length_penalty = 1.0;
  OnNonfinite on_nonfinite = OnNonfinite::skip;
  bool distributed = false;  // join an MPI job (automatic under mpirun); not saved in config.toml
  // synthetic copy task (--task copy)
  int64_t copy_symbols = 10, copy_min_len = 4, copy_max_len = 10, copy_train_size = 20000,
          copy_valid_size = 200;

  // Every field but `model` as an option, in the order of `rosetta train --help`: f(value, field).
  // `model` comes between the tokenizer and the optimisation options, as f(model, field) with
  // field.key "model": its own options are nn::TransformerOptions::for_each_field.
  template <class Self, class F>
  static void for_each_field(Self& c, F&& f);

  // Throws rosetta::Error naming the first invalid value.
  void validate() const;
  // The length filters in effect: --max-src-len/--max-tgt-len, or else what --max-len allows
  // (a source takes its length in positions, a target its length + 1).
  int64_t src_limit() const { return max_src_len > 0 ? max_src_len : model.max_len(); }
  int64_t tgt_limit() const { return max_tgt_len > 0 ? max_tgt_len : model.max_len() - 1; }
  double max_time_seconds() const;  // 0 = no limit
  // Whether --max-steps, --max-epochs or --max-time limits the run.
  bool has_budget() const { return max_steps > 0 || max_epochs > 0 || max_time_seconds() > 0; }
  // The early-stopping patience in effect: early_stopping where given (>= 0); by default
  // kDefaultEarlyStopping for a run without a budget, which so ends by itself once it stops
  // improving (as Marian's runs do), and 0 for a run with one, which trains to the budget's end
  // (where its schedule decays and the trained weights are validated against the best kept).
  int64_t early_stopping_validations() const;
  // --warmup: a number of updates, or a share of the budget ("5%": share 0.05).
  struct Warmup {
    int64_t updates = 0;
    double share = 0;
    bool is_share = false;
  };
  Warmup warmup_spec() const;  // throws naming --warmup
  // Whether the schedule decays over the budget (linear, cosine).
  bool budget_schedule() const {
    return schedule == optim::ScheduleKind::linear || schedule == optim::ScheduleKind::cosine;
  }
  // `model` for these vocabularies (shared embeddings only when they are equal).
  nn::TransformerOptions model_options(int64_t src_vocab, int64_t tgt_vocab) const;
};

// One option of TrainConfig: a `rosetta train` flag (--KEY with '-' for '_') and a config.toml key.
struct ConfigField {
  const char* key;
  const char* group;        // of the help
  const char* description;  // for the help
  // The words an enum option may take, when not all of its own (enum_words).
  std::vector<std::string> choices = {};
  bool saved = true;        // false: a flag of one invocation, never in config.toml (--resume)
};

template <class Self, class F>
void TrainConfig::for_each_field(Self& c, F&& f) {
  using C = ConfigField;
  const char *data = "Data", *noise = "More data and noise", *tok = "Tokenizer", *opt = "Optimisation",
             *stop = "Stopping", *run = "Run", *copy = "Copy task";
  f(c.task, C{"task", data, "translate, or copy (synthetic copy task, no files)"});
  f(c.train, C{"train", data, "training corpus, TSV: source<TAB>target"});
  f(c.valid, C{"valid", data, "validation corpus, TSV"});
  f(c.src, C{"src", data, "training sources, one per line (with --tgt)"});
  f(c.tgt, C{"tgt", data, "training targets, line-aligned with --src"});
  f(c.valid_src, C{"valid_src", data, "validation sources (with --valid-tgt)"});
  f(c.valid_tgt, C{"valid_tgt", data, "validation targets"});
  f(c.out, C{"out", data, "run directory to create"});
  f(c.resume, C{"resume", data, "run directory to continue from its last checkpoint", {}, false});
  f(c.max_src_len, C{"max_src_len", data, "drop pairs whose source has more tokens (0: as many as --max-len allows)"});
  f(c.max_tgt_len, C{"max_tgt_len", data, "drop pairs whose target has more tokens (0: as many as --max-len allows)"});

  f(c.train_repeat, C{"train_repeat", noise, "each training pair appears this many times per epoch"});
  f(c.extra_train, C{"extra_train", noise, "extra training pairs, TSV (e.g. phrases.tsv of prepare-corpus --phrases)"});
  f(c.extra_max, C{"extra_max", noise, "use at most this many extra pairs, a sample fixed by --seed (0: all)"});
  f(c.extra_tag, C{"extra_tag", noise, "start the sources of extra pairs with a tag token"});
  f(c.word_dropout, C{"word_dropout", noise, "replace source and decoder-input tokens by <unk> with this probability"});
  f(c.sp_nbest, C{"sp_nbest", noise, "subword regularization: sample one of the N best segmentations per epoch (< 2: off)"});
  f(c.sp_alpha, C{"sp_alpha", noise, "subword regularization: P(segmentation) ~ exp(alpha * log-prob)"});

  f(c.vocab_size, C{"vocab_size", tok, "SentencePiece vocabulary size"});
  f(c.joint_vocab, C{"joint_vocab", tok, "one vocabulary for source and target"});
  f(c.tokenizer, C{"tokenizer", tok, "unigram or bpe"});

  f(c.recipe, C{"recipe", "Model",
                "auto, small or large: set the model, optimisation and regularization options not given "
                "(auto: by the updates the budget gives); none: the options alone. Not given: auto for a run "
                "with a budget (--max-time, --max-steps, --max-epochs) and no model or regularization option, "
                "else none"});
  f(c.model, C{"model", "Model", "the options of nn::TransformerOptions"});

  f(c.label_smoothing, C{"label_smoothing", opt, "label smoothing"});
  f(c.optimizer, C{"optimizer", opt, "adam, adamw or sgd"});
  f(c.lr, C{"lr", opt, "peak learning rate (the factor, for noam)"});
  f(c.beta1, C{"beta1", opt, "Adam beta1"});
  f(c.beta2, C{"beta2", opt, "Adam beta2"});
  f(c.eps, C{"eps", opt, "Adam epsilon"});
  f(c.weight_decay, C{"weight_decay", opt, "weight decay"});
  f(c.momentum, C{"momentum", opt, "SGD momentum"});
  f(c.schedule, C{"schedule", opt,
                  "constant, noam, inverse-sqrt, linear or cosine (the last two decay to --decay-to at the end of "
                  "--max-steps or --max-time)"});
  f(c.warmup, C{"warmup", opt, "warmup steps, or a share of the budget's updates (e.g. 5%: of --max-steps, or of "
                              "the updates --max-time allows, estimated as the run goes)"});
  f(c.decay_to, C{"decay_to", opt, "linear and cosine schedules: the learning rate at the end of the budget, as a "
                                   "share of --lr"});
  f(c.max_tokens, C{"max_tokens", opt, "token budget per batch (B x padded length)"});
  f(c.accum, C{"accum", opt, "batches accumulated per update"});
  f(c.clip, C{"clip", opt, "clip gradients to this global norm (0: off)"});

  f(c.max_steps, C{"max_steps", stop, "stop after this many updates (0: no limit)"});
  f(c.max_epochs, C{"max_epochs", stop, "stop after this many epochs (0: no limit)"});
  f(c.max_time, C{"max_time", stop, "stop after this long: seconds, or 90s, 15m, 2h"});
  f(c.early_stopping, C{"early_stopping", stop, "stop after this many validations without improvement of --best-metric "
                                               "(0: off; -1: 10 for a run without a budget, off for one with a budget)"});
  f(c.best_metric, C{"best_metric", stop, "keep best.safetensors and stop early by validation loss, BLEU or chrF"});
  f(c.ema, C{"ema", stop, "keep an exponential moving average of the weights with this decay (0: off); "
                          "validation, best.safetensors and ema.safetensors use it"});
  f(c.keep_checkpoints, C{"keep_checkpoints", stop,
                          "keep the weights of the last N checkpoints as step-STEP.safetensors (for rosetta average)"});

  f(c.seed, C{"seed", run, "random seed (weights, dropout, data order)"});
  f(c.threads, C{"threads", run, "threads (0: OMP_NUM_THREADS or all cores)"});
  f(c.replicas, C{"replicas", run, "model replicas, one per thread, each training a shard of every batch (0: one "
                                   "per thread for models whose GEMMs are too small for BLAS's threads, else 1)"});
  f(c.precision, C{"precision", run, "matrix products: fp32, bf16 (bf16 operands, fp32 sums; weights, optimizer, "
                                     "softmax and layer norm stay fp32) or auto (bf16 where the CPU's bf16 products, AVX512_BF16, "
                                     "AMX or ARM64's BF16, run at 1.5x or more of its fp32 multiply-add rate); int8 "
                                     "is for decoding (translate, eval)",
                   {"fp32", "bf16", "auto"}});
  f(c.memory_limit, C{"memory_limit", run, "memory the run may use, e.g. 2G or 512M (default: what is available, "
                                           "from /proc/meminfo and the cgroup's limit); a larger plan is refused "
                                           "before it starts"});
  f(c.validate_every, C{"validate_every", run, "validate every N updates (0: only at the end)"});
  f(c.save_every, C{"save_every", run, "checkpoint every N updates (0: only at the end)"});
  f(c.log_every, C{"log_every", run, "log training metrics every N updates"});
  f(c.valid_bleu_sentences, C{"valid_bleu_sentences", run, "validation sentences translated for BLEU/chrF (0: none)"});
  f(c.valid_beam, C{"valid_beam", run, "beam size for validation translations"});
  f(c.valid_length_penalty, C{"valid_length_penalty", run, "length penalty for validation translations"});
  f(c.on_nonfinite, C{"on_nonfinite", run, "a non-finite loss or gradient: skip the update (100 in a row stop the "
                                           "run), or stop"});
  f(c.distributed, C{"distributed", run, "data-parallel over MPI: mpirun -np N rosetta train ... (automatic under "
                                         "mpirun)", {}, false});

  f(c.copy_symbols, C{"copy_symbols", copy, "distinct symbols"});
  f(c.copy_min_len, C{"copy_min_len", copy, "shortest sequence"});
  f(c.copy_max_len, C{"copy_max_len", copy, "longest sequence"});
  f(c.copy_train_size, C{"copy_train_size", copy, "training sequences"});
  f(c.copy_valid_size, C{"copy_valid_size", copy, "held-out sequences"});
}

// The flag of a model option: --d-model for d_model; norm_first is --norm (pre|post).
std::string model_option_flag(const std::string& key);

// The line of each key of a TOML configuration as --dump-config writes it ("table.key" for a key
// in a [table]), after checking that every line is blank, a comment, a [table] header or
// `key = value` with one TOML value (a number, true or false, a quoted string, a one-line
// array), and that no key comes twice in one table; throws "NAME:LINE: ..." otherwise. (CLI11's
// reader, which gives `rosetta train --config` the values, takes `lr = = 3` as two values and a
// second `lr` as a second value, and says "At Most 1 required".)
std::map<std::string, int> config_toml_lines(const std::string& toml, const std::string& name);

}  // namespace rosetta::translator
