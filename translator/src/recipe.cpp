#include "rosetta/translator/recipe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "rosetta/core/check.h"
#include "rosetta/core/cpu.h"
#include "rosetta/data/corpus.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/process_group.h"
#include "rosetta/translator/synthetic.h"

namespace rosetta::translator {

using rosetta::detail::concat;

namespace {

struct Shape {
  int64_t d, heads, ff, encoder_layers, decoder_layers, max_tokens, warmup;
  nn::Activation activation;
  double lr;
};

// small: the defaults of TrainConfig.
Shape shape_of(const std::string& name) {
  if (name == "small") {
    const TrainConfig c;
    const nn::TransformerOptions& m = c.model;
    return {m.d_model(), m.heads(),  m.ff(), m.encoder_layers(), m.decoder_layers(), c.max_tokens,
            c.warmup_spec().updates, m.activation(), c.lr};
  }
  if (name == "large") return {512, 8, 2048, 3, 3, 4000, 1500, nn::Activation::gelu, 1e-3};
  ROSETTA_FAIL("--recipe ", name, " is not a recipe (auto, small, large or none)");
}

// Training FLOPs per token pair (a source and a target token), in units that cancel: the
// products of the layers and the output projection over a 5,000-piece vocabulary.
double flops_per_token(const Shape& s) {
  const double d = double(s.d), f = double(s.ff);
  const double encoder = 8 * d * d + 4 * d * f;       // attention projections, feed-forward
  const double decoder = 16 * d * d + 4 * d * f;      // self and cross attention, feed-forward
  return double(s.encoder_layers) * encoder + double(s.decoder_layers) * decoder + 2 * d * 5000;
}

// Seconds per update of the small recipe's model on this machine: a few updates of a synthetic
// batch of its token budget (pairs of 16 tokens a side), timed after one to warm up.
double small_update_seconds(const TrainConfig& c) {
  const Shape s = shape_of("small");
  const int64_t len = 16;
  const MatmulPrecisionScope precision(resolve_precision(c.precision));
  struct Threads {  // --threads for the probe, and back again however it ends
    int saved = get_num_threads();
    ~Threads() { set_num_threads(saved); }
  } threads;
  if (c.threads > 0) set_num_threads(c.threads);
  optim::AdamOptions ao;
  ao.lr = s.lr;
  SyntheticTraining training(TrainConfig().model_options(c.vocab_size, c.vocab_size), ao,
                             {s.max_tokens / len, len, len}, c.replicas);
  training.step();
  const int timed = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < timed; ++i) training.step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / timed;
}

// Where the budget comes from, and the small recipe's seconds per update when it is time.
struct BudgetSource {
  std::string how = "no budget";
  double small_seconds = 0;  // timed for --max-time (0: not timed)
};

BudgetSource budget_source(const TrainConfig& c) {
  BudgetSource s;
  // Each process of a job would time its own machine and could choose differently: a job
  // goes by --max-steps.
  const bool job = c.distributed || train::launched_size() > 1;
  ROSETTA_CHECK(!job || c.max_time_seconds() == 0 || c.max_steps > 0, "--recipe ", recipe_choice_name(c.recipe),
                " with --max-time alone times this machine, and each process of a job could choose differently:"
                " give --max-steps (or a fixed --recipe small or large)");
  if (c.max_time_seconds() > 0 && !job) s.small_seconds = small_update_seconds(c);
  // Without a budget a run trains to its plateau, where early stopping ends it: unlimited
  // updates and passes, so `auto` takes the large recipe with its strongest regularization.
  if (c.early_stopping_validations() > 0)
    s.how = concat("no budget but early stopping (after ", c.early_stopping_validations(),
                   " validations without improvement)");
  return s;
}

// The tokens of one update of recipe `name`: its batch, or --max-tokens where that is given.
double batch_tokens(const std::string& name, const TrainConfig& c, const std::set<std::string>& given) {
  return given.contains("max-tokens") ? double(c.max_tokens) : double(shape_of(name).max_tokens);
}

// What the budget of `c` gives recipe `name` over a corpus of `tokens`; names its limit in `how`.
Budget budget_for(const std::string& name, const TrainConfig& c, const std::set<std::string>& given,
                  double tokens, const BudgetSource& source, std::string* how) {
  const double per_update = batch_tokens(name, c, given);
  // The small model's timed update scaled by FLOPs: the recipe's model, and the batch it will take.
  const double cost = update_cost(name) * per_update / double(shape_of(name).max_tokens);
  Budget b{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  if (how) *how = source.how;
  using Limit = Budget::Limit;
  const auto limit = [&](double updates, const std::string& what, Limit kind) {
    if (updates >= b.updates) return;
    b.updates = updates;
    b.limit = kind;
    if (how) *how = what;
  };
  if (c.max_epochs > 0)
    limit(double(c.max_epochs) * tokens / per_update, concat("--max-epochs ", c.max_epochs), Limit::epochs);
  // 5% of the time goes to validations and checkpoints (the 13-minute Ding run: 4.2 updates/s in
  // all, against 4.4 in its training lines).
  if (source.small_seconds > 0)
    limit(0.95 * c.max_time_seconds() / (source.small_seconds * cost),
          concat("--max-time ", c.max_time, " at ", std::round(10 / source.small_seconds) / 10,
                 " updates/s of the small model (timed here)"),
          Limit::time);
  if (c.max_steps > 0) limit(double(c.max_steps), concat("--max-steps ", c.max_steps), Limit::steps);
  if (std::isfinite(b.updates)) b.passes = b.updates * per_update / tokens;
  b.corpus_tokens = tokens;
  return b;
}

std::string format_count(double x) {
  if (!std::isfinite(x)) return "unlimited";
  return concat("~", std::llround(x));
}

}  // namespace

double estimated_tokens(double bytes) { return bytes / 3; }

bool recipe_by_default(const TrainConfig& c, const std::set<std::string>& given) {
  static const char* const kModelOrRegularization[] = {
      "recipe",     "d-model",           "heads",           "ff",      "encoder-layers", "decoder-layers",
      "activation", "norm",              "dropout",         "attention-dropout", "activation-dropout",
      "max-len",    "share-embeddings",  "tie-output",      "label-smoothing",   "word-dropout", "sp-nbest"};
  if (c.task != Task::translate || !c.resume.empty()) return false;
  if (!c.has_budget()) return false;
  for (const char* key : kModelOrRegularization)
    if (given.contains(key)) return false;
  return true;
}

double update_cost(const std::string& name) {
  const Shape s = shape_of(name), small = shape_of("small");
  return flops_per_token(s) * double(s.max_tokens) / (flops_per_token(small) * double(small.max_tokens));
}

namespace {

// The small recipe's shape in a time budget (recipe.h): a smaller batch with the same warm-up
// tokens, a narrower feed-forward layer.
Shape few_passes_shape(Shape s) {
  s.max_tokens /= kFewPassesBatchDivisor;
  s.warmup *= kFewPassesBatchDivisor;
  s.ff /= kFewPassesFfDivisor;
  return s;
}

double small_dropout(double passes) {
  if (passes >= kManyPasses) return 0.2;
  if (passes >= kSomePasses) return 0.15;
  if (passes >= kFewPasses) return 0.1;
  return 0.05;
}

}  // namespace

Recipe recipe_settings(const std::string& name, double passes, bool few_passes_shape_) {
  Shape s = shape_of(name);
  const bool many = passes >= kManyPasses, large = name == "large", few = few_passes_shape_ && name == "small";
  if (few) s = few_passes_shape(s);
  const double dropout = large ? (many ? 0.4 : 0.1) : small_dropout(passes);
  const double smoothing = large ? (many ? 0.2 : 0.1) : (passes >= kFewPasses ? 0.2 : 0.1);
  Recipe r;
  r.name = name;
  r.settings = {{"d-model", concat(s.d)},
                {"heads", concat(s.heads)},
                {"ff", concat(s.ff)},
                {"encoder-layers", concat(s.encoder_layers)},
                {"decoder-layers", concat(s.decoder_layers)},
                {"activation", concat('"', nn::activation_name(s.activation), '"')},
                {"dropout", concat(dropout)},
                {"label-smoothing", concat(smoothing)},
                {"lr", concat(s.lr)},
                {"warmup", concat(s.warmup)},
                {"max-tokens", concat(s.max_tokens)},
                {"best-metric", "\"bleu\""}};
  if (!large && passes < kSomePasses) r.settings.emplace_back("schedule", "\"linear\"");
  // As many validations per token as with the whole batch, so that validation keeps its share of
  // the run's time (docs/results/recipes.md: a narrower feed-forward layer, fewer validations).
  if (few)
    r.settings.emplace_back("validate-every", concat(TrainConfig{}.validate_every * kFewPassesBatchDivisor));
  return r;
}

Recipe choose_recipe(const TrainConfig& c, const std::set<std::string>& given) {
  ROSETTA_CHECK(c.recipe != RecipeChoice::none, "--recipe none: the options as given, no recipe to choose");
  const data::Corpus corpus = c.train.empty() ? data::read_aligned(c.src, c.tgt) : data::read_tsv(c.train);
  double bytes = 0;
  for (const data::SentencePair& p : corpus.pairs) bytes += double(std::max(p.src.size(), p.tgt.size()));
  const double tokens = std::max(1.0, estimated_tokens(bytes * double(c.train_repeat)));
  const BudgetSource source = budget_source(c);
  std::string how;
  const Budget large = budget_for("large", c, given, tokens, source, nullptr);
  // kLargeUpdates counts the large recipe's batches: a given smaller batch needs more updates.
  const double large_batches =
      large.updates * batch_tokens("large", c, given) / double(shape_of("large").max_tokens);
  const std::string name = c.recipe != RecipeChoice::automatic ? recipe_choice_name(c.recipe)
                           : large_batches >= kLargeUpdates    ? "large"
                                                               : "small";
  Recipe r = recipe_for_budget(name, budget_for(name, c, given, tokens, source, &how), c, given);
  r.reason = concat("recipe ", name, c.recipe == RecipeChoice::automatic ? " (auto)" : "", ": ", how, " give ",
                    r.reason, " over ", format_count(tokens), " tokens of ", corpus.pairs.size(), " pairs");
  const std::string large_of =
      given.contains("max-tokens") ? concat(" of its ", shape_of("large").max_tokens, " tokens") : "";
  r.reason += concat(" (the large recipe: ", format_count(large_batches), " updates", large_of, "; it needs ",
                     int64_t(kLargeUpdates), ")");
  return r;
}

Recipe recipe_for_budget(const std::string& name, const Budget& b, const TrainConfig& c,
                         const std::set<std::string>& given) {
  // The shape comes first: the small recipe's few-passes shape in a time budget, unless the batch
  // is given (the user's: no warm-up for the recipe's halved one). Every later decision counts in
  // the units of the shape the run trains with: its updates and warm-up, and the passes it makes
  // (the few-passes shape's narrower layer passes more tokens in the same time). Every passes
  // count is at Ding's scale: a pass over a larger corpus overfits less.
  const bool few = name == "small" && b.limit == Budget::Limit::time && !given.contains("max-tokens");
  const Shape own = shape_of(name), run = few ? few_passes_shape(own) : own;
  const double scale = b.corpus_tokens > kReferenceTokens ? kReferenceTokens / b.corpus_tokens : 1.0;
  double updates = b.updates, passes = b.passes;
  if (few) {
    // An update of half the tokens takes half the time; the narrower layer does fewer FLOPs per token.
    const double speedup = flops_per_token(own) / flops_per_token(run);
    updates *= double(kFewPassesBatchDivisor) * speedup;
    passes *= speedup;
  }
  Recipe r = recipe_settings(name, passes * scale, few);
  const auto drop = [&r](const std::string& key) {
    std::erase_if(r.settings, [&key](const auto& kv) { return kv.first == key; });
  };
  const auto set = [&r](const std::string& key, const std::string& value) {
    for (auto& [k, v] : r.settings)
      if (k == key) v = value;
  };
  // Without validation translations there is no BLEU to keep the best weights by.
  if (c.valid_bleu_sentences == 0) drop("best-metric");
  // The linear schedule ends with --max-steps or --max-time (not with --max-epochs, where those
  // run out first), and needs room after its warm-up: the recipe's warm-up is shortened to
  // 1 / kLinearWarmups of a shorter budget (so that a slightly slower machine still decays its
  // rate); a warm-up the user gave is theirs, and without that room the rate keeps its
  // inverse-square-root decay.
  const TrainConfig::Warmup w = c.warmup_spec();
  const bool linear = std::any_of(r.settings.begin(), r.settings.end(), [](const auto& kv) { return kv.first == "schedule"; });
  if (!b.by_updates_or_time()) {
    drop("schedule");
  } else if (linear && given.contains("warmup")) {
    if (!w.is_share && updates < kLinearWarmups * double(w.updates)) drop("schedule");
  } else if (linear) {
    const int64_t warmup = std::max<int64_t>(run.warmup, 0);
    if (updates < kLinearWarmups * double(warmup))
      set("warmup", concat(std::max<int64_t>(1, int64_t(std::floor(updates / kLinearWarmups)))));
  }
  // The passes as made, and at Ding's scale where that differs (which the rule counts).
  const auto passes_text = [scale](double p) {
    return concat(format_count(p), " passes",
                  scale < 1 ? concat(" (", format_count(p * scale), " at the scale of ", int64_t(kReferenceTokens), " tokens)")
                            : std::string());
  };
  if (few) {
    r.reason = concat("the small model ", passes_text(b.passes), "; in a time budget a smaller batch and model: ",
                      format_count(updates), " updates of ", run.max_tokens, " tokens with a feed-forward width of ",
                      run.ff, ", ", passes_text(passes));
  } else {
    r.reason = concat(format_count(updates), " updates, ", passes_text(passes));
  }
  return r;
}

}  // namespace rosetta::translator
