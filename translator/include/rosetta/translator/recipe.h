// Recipes (`rosetta train --recipe`): the model, optimisation and regularization settings of a
// run, chosen by the training its budget gives. Two sizes:
//
//   small  d_model 256, 4 heads, FF 1024, 2+2 layers, ReLU, Adam 2e-3, 300 warm-up updates,
//          2,500-token batches (the defaults of `rosetta train`)
//   large  d_model 512, 8 heads, FF 2048, 3+3 layers, GELU, Adam 1e-3, 1,500 warm-up updates,
//          4,000-token batches
//
// and the regularization by the passes over the training corpus the budget gives: the more
// passes, the more a run overfits, and the stronger the regularization that pays. In a budget of
// time the small one trains the few-passes shape (half its batch and feed-forward width,
// validated every 400 updates: kFewPassesBatchDivisor, kFewPassesFfDivisor).
// The small one: dropout 0.05 and label smoothing 0.1 under kFewPasses, then smoothing 0.2 with
// dropout 0.1, from kSomePasses 0.15 and from kManyPasses 0.2; under kSomePasses its rate decays
// linearly to zero at the end of a budget of updates or time. The large one: dropout 0.1 and
// smoothing 0.1, from kManyPasses 0.4 and 0.2. Every recipe keeps best.safetensors by validation
// BLEU (where validation translations are on): the loss bottoms out earlier than BLEU peaks.
// The shape comes from the passes the recipe's own shape would make; every other setting from the
// passes and updates of the shape the run trains with (recipe_for_budget), so that no decision
// counts in units the run does not use. `auto` takes the large model only when its budget reaches
// kLargeUpdates updates; `rosetta train` takes `auto` for a run with a budget and no model or
// regularization option given (recipe_by_default). The rule for
// users: docs/cli.md#recipes; each constant's measurements: the notebook entry its comment names.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/translator/config.h"

namespace rosetta::translator {

// From this many passes, dropout 0.2 (the large recipe: 0.4, and label smoothing 0.2): a
// run that sees its corpus this often overfits the lighter setting before its budget ends. The
// threshold lies between the most passes where the lighter setting won and the fewest where the
// stronger one did, on two corpora and two machines:
// docs/results/recipes.md#kmanypasses-25-the-passes-threshold
inline constexpr double kManyPasses = 25;
// From this many passes (and below kManyPasses), the small recipe's dropout is 0.15, between the
// light and the strong setting; the large one keeps 0.1 (not measured there):
// docs/results/recipes.md#ksomepasses-16-dropout-015-from-it
inline constexpr double kSomePasses = 16;
// Under this many passes the small recipe's dropout is 0.05: a run that stops far from its
// plateau is held back by regularization more than it overfits:
// docs/results/recipes.md#kfewpasses-12-dropout-005-below-it
// From it, the small recipe's label smoothing is 0.2 (0.1 under it): on Ding 0.2 measured ahead
// of 0.1 or even with it at every passes count tried from here up; under it (the messages
// corpus) 0.1 stays, not measured against 0.2:
// docs/results/recipes.md#label-smoothing-02-from-12-passes
inline constexpr double kFewPasses = 12;
// In a budget of time (--max-time) the small recipe trains the few-passes shape (named for where
// it was first measured): about 2.5x the updates of its own shape in the same minutes, 1.27x the
// passes, and every later setting counts the updates and passes of that shape. At the same FLOPs
// and with the same regularization it led the small model's own shape at every passes count
// measured on Ding, from ~11 to ~48 of the own shape's passes: the more updates win while the run
// stops short of overfitting, and once it overfits the weights kept by BLEU stay ahead. So there
// is no step in passes where a machine a few percent faster would change the shape:
// docs/results/recipes.md#the-few-passes-shape-at-every-budget-of-time-2026-12-05-later-the-same-zen-4-and-protocol
// Its batch is the small recipe's divided by this (1,250 tokens, and 600 warm-up updates: the
// same warm-up tokens). An update of half the tokens takes about half the time, so the same
// minutes give about twice the updates, and short of overfitting more updates learn more than
// bigger ones. A budget of updates (--max-steps) keeps the batch: halving it would halve the
// tokens of its updates.
// docs/results/recipes.md#kfewpassesbatchdivisor-2-half-batches-below-12-passes-of-a-time-budget
inline constexpr int64_t kFewPassesBatchDivisor = 2;
// There, too, its feed-forward width is divided by this (512): an update takes less time, so the
// minutes give more updates, which at few passes learn more than the wider layer does. In a
// budget of updates the width stays (fewer FLOPs per update only pay in more updates):
// docs/results/recipes.md#kfewpassesffdivisor-2-feed-forward-width-512-there
inline constexpr int64_t kFewPassesFfDivisor = 2;
// Under kSomePasses the small recipe's learning rate also decays linearly to zero at the end of
// the budget (`--schedule linear`, for --max-steps and --max-time), its warm-up at most
// 1 / kLinearWarmups of the budget's updates (a shorter budget shortens the recipe's warm-up; a
// warm-up the user gave that leaves less room keeps the inverse-square-root decay): a rate that
// ends with the budget gains where the run stops far from its plateau, not where it overfits
// (there the inverse-square-root decay stays):
// docs/results/recipes.md#klinearwarmups-and-the-schedule-linear-to-zero-below-16-passes
inline constexpr double kLinearWarmups = 4;
// The regularization's thresholds count passes over a corpus of about this many tokens (Ding's
// 18k pairs, ~281k tokens, where they were measured); a larger corpus's passes count in inverse
// proportion to its size (over 3.1x the tokens, a third of its passes), since a pass over more
// data overfits less: on the messages corpus (56k pairs, ~934k tokens) dropout 0.05 led 0.1 and
// 0.2 at ~21 passes as at ~9, where Ding's thresholds take 0.15. A smaller corpus keeps its passes
// (not measured):
// docs/results/recipes.md#kreferencetokens-the-passes-of-a-larger-corpus-2026-12-04
inline constexpr double kReferenceTokens = 300000;
// `auto` takes the large recipe from this many of its updates, about where it reaches its
// plateau on Ding; with fewer, the small recipe's extra updates win:
// docs/results/recipes.md#klargeupdates-5000-the-large-recipe
inline constexpr double kLargeUpdates = 5000;

struct Recipe {
  std::string name;  // small | large
  // TrainConfig options (config.toml's keys, `rosetta train` flags without the dashes) and their
  // values as TOML writes them, strings quoted: {"d-model", "256"}, {"activation", "\"relu\""}.
  std::vector<std::pair<std::string, std::string>> settings;
  // For the log: the estimate and the rule that chose (without the settings).
  std::string reason;
};

// The settings of recipe `name` (small | large) for a run that makes `passes` over the corpus
// (the regularization), in the few-passes shape (the small one's half batch and narrower layer)
// where `few_passes_shape`; `reason` is left empty. Throws naming --recipe for another name.
Recipe recipe_settings(const std::string& name, double passes, bool few_passes_shape = false);

// What a budget gives a recipe's own shape (its batch and model): updates, passes over the
// corpus, and the limit that binds.
struct Budget {
  double updates = 0;  // infinite: no budget
  double passes = 0;   // infinite: no budget
  enum class Limit { none, epochs, steps, time } limit = Limit::none;
  double corpus_tokens = 0;  // the training corpus's estimated tokens (0: not known, passes as made)
  bool by_updates_or_time() const { return limit == Limit::steps || limit == Limit::time; }
};

// The settings of recipe `name` for budget `b` of configuration `c`, of which the options in
// `given` are the user's. The shape first: the small recipe's few-passes shape in a time budget
// (where no batch is given). Then every setting by the run that shape makes: the regularization
// by its passes (at Ding's scale, for a corpus larger than kReferenceTokens), the linear
// schedule's warm-up by its updates (recipe.h).
// `reason` says what the run makes, for the log.
Recipe recipe_for_budget(const std::string& name, const Budget& b, const TrainConfig& c,
                         const std::set<std::string>& given = {});

// --recipe auto, small or large for configuration `c`: reads its training corpus (its size, in
// tokens estimated from the bytes) and estimates the updates of its budget: --max-steps, the
// updates of --max-epochs, or, with --max-time, the updates per second of the small model timed
// here for a few updates on synthetic batches (about a second on 2 cores; threads and precision
// as `c` sets them). `given` names the options the user set (config.toml's keys), which the
// recipe will not set: a given max-tokens is the batch its updates and passes count in (else the
// recipe's), a given warmup what its linear schedule needs room after. Throws for --recipe none,
// a corpus that cannot be read, and --max-time alone in a job of several processes (each would
// time its own machine: give --max-steps).
Recipe choose_recipe(const TrainConfig& c, const std::set<std::string>& given = {});

// Whether `rosetta train` takes --recipe auto without being asked: a translation run (not
// --task copy) with a budget (--max-time, --max-steps or --max-epochs) and none of the model or
// regularization options (the model's shape, dropout, label smoothing, word dropout, subword
// sampling) nor --recipe among `given` (the options given on the command line or in --config).
// Without a budget, or with any of those, the options stay as given (--recipe none).
bool recipe_by_default(const TrainConfig& c, const std::set<std::string>& given);

// The training tokens of a corpus of `bytes` (the longer side of each pair, summed): the
// 5,000-piece vocabularies take ~3 bytes per padded batch token on both measured corpora.
double estimated_tokens(double bytes);

// The training FLOPs of one update of recipe `name` relative to one of the small recipe's
// (large: ~8x), from their FLOPs per token and batch sizes.
double update_cost(const std::string& name);

}  // namespace rosetta::translator
