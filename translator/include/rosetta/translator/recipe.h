// Recipes (`rosetta train --recipe`): the model, optimisation and regularization settings of a
// run, chosen by the training its budget gives. Two sizes:
//
//   small  d_model 256, 4 heads, FF 1024, 2+2 layers, ReLU, Adam 2e-3, 300 warm-up updates,
//          2,500-token batches (the defaults of `rosetta train`)
//   large  d_model 512, 8 heads, FF 2048, 3+3 layers, GELU, Adam 1e-3, 1,500 warm-up updates,
//          4,000-token batches
//
// and the regularization by the passes over the training corpus the budget gives: dropout 0.1
// and label smoothing 0.1 for few passes (the small one's dropout 0.05 under kFewPasses, and in a
// budget of time half its batch and feed-forward width there, validated every 400 updates:
// kFewPassesBatchDivisor, kFewPassesFfDivisor); from
// kSomePasses dropout 0.15 (small); for many (at least kManyPasses) dropout 0.2 and smoothing
// 0.1 (large: 0.4 and 0.2), the small one's smoothing 0.2 from kMostPasses; under kSomePasses the small one's rate decays linearly to zero
// at the end of a budget of updates or time. Every recipe keeps best.safetensors by validation
// BLEU (where validation translations are on): the loss bottoms out earlier than BLEU peaks.
// `auto` takes the large model only when its budget reaches kLargeUpdates updates. Where the
// numbers come from: README, "Recipes".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/translator/config.h"

namespace rosetta::translator {

// Measured at the updates 13 minutes give on 2 cores, best weights by BLEU (README, "Recipes"):
// on Ding (18k pairs) at ~27 estimated passes (29 made; a Zen 4) dropout 0.2 / smoothing 0.1
// gave 8.30 and 8.61 valid BLEU (two seeds), 0.1 / 0.1 7.39 and 0.3 / 0.2 7.23; at ~18 (2,035
// updates; a Xeon in fp32) 0.1 / 0.1 gave 5.91 and 0.2 / 0.1 5.09. On the messages corpus (56k
// pairs) 0.1 / 0.1 won at ~9 passes (0.3 / 0.2 lost 9.6) and at ~23 (65.26 at 8,000 updates,
// 0.2 / 0.1 60.75). The threshold lies between the most passes where the light setting won (23)
// and the fewest where the strong one did (27).
inline constexpr double kManyPasses = 25;
// Between: on Ding at 2,000 updates (~19 passes; the Xeon's 13 minutes in fp32), all validation
// pairs, beam 4, two seeds, dropout 0.15 / 0.1: the EMA weights 7.54 / 7.02 and 7.87 / 7.35, the
// weights kept by BLEU 7.48 / 6.88 and 7.61 / 7.50. A third, less controlled pair (README command
// (1) from fresh clones, 2 threads) went the other way: 7.35 / 7.44 kept by BLEU, 7.24 / 7.59
// EMA; +0.22 on average over the six comparisons. At 1,400 updates (~13 passes, seed 1) 0.1 was
// ahead or even (EMA 7.05 / 6.65, kept 6.61 / 6.65), at 1,000 (~9) ahead in validation loss. The
// small recipe takes 0.15 from here, between 13 and 19 (the large one was not measured there and
// keeps 0.1).
inline constexpr double kSomePasses = 16;
// Fewer still: on the messages corpus at 3,400 updates (~9 passes; what 13 minutes give a 2-core
// Zen 4 in bf16), all validation pairs, beam 4, seed 1, the small recipe with its linear
// schedule: dropout 0.05 61.51 valid BLEU against 59.22 with 0.1 (seed 2: 60.48 / 59.78), and
// 60.28 with 0 (its validation loss rising from 2,400 updates); 0.05 with half batches (1,250
// tokens, 5,900 updates) 61.27. The small recipe takes 0.05 under this, between those ~9 passes and the ~14
// where 0.1 was measured and kept (Ding on a Zen 3, the messages corpus on a Xeon with AMX);
// on Ding at ~9 passes (1,000 updates) 0.1 led 0.15, the same direction, but 0.05 was not run
// there.
inline constexpr double kFewPasses = 12;
// Under kFewPasses in a budget of time (--max-time), the small recipe's batch is divided by this
// (1,250 tokens, and 600 warm-up updates: the same warm-up tokens). On 2 cores an update of half
// the tokens takes about half the time (600 updates of 1,250 tokens in 80 s, 300 of 2,500 in 76 s:
// the Zen 4 in bf16), so the same minutes give twice the updates, and at few passes those learn
// more: on the messages corpus, 1 thread per run, 6,400 half updates against 3,400 full ones
// (about the same time), all validation pairs, beam 4, seed 2: 62.35 valid BLEU against 60.48
// (the last weights 62.38 / 61.55), validation loss 1.081 against 1.131; seed 1 at 5,900 half
// updates (8% less time): 61.27 / 61.51 (last 61.92 / 61.64), loss 1.095 / 1.141; seed 3 (half)
// 61.77. Quarter batches came out even with half ones (seeds 2 / 3: 61.91 / 62.40), and half
// ones with lr 3e-3 behind (61.10 / 61.06). The 13-minute command (2 threads): 62.23 against
// 61.35. A budget of updates (--max-steps) keeps the batch: halving it would halve the tokens
// of its updates.
inline constexpr int64_t kFewPassesBatchDivisor = 2;
// There, too, its feed-forward width is divided by this (512): an update takes ~0.8 of the time
// (400 half updates, 1 thread beside another run: 71 s against 87 s), so the same minutes give
// ~1.2x the updates, and at few passes those learn more than the wider layer does: on the messages
// corpus, half batches, the protocol above (1 thread per run, two at a time, about equal time),
// 7,800 updates against 6,400, all validation pairs, beam 4: seed 2 63.40 valid BLEU kept against
// 62.35 (the last weights 63.15 / 62.38), validation loss 1.082 / 1.081; seed 3 62.72 / 61.77 (last
// 63.27 / 62.15), 1.075 / 1.081. Width 256 (8,800 updates, seed 2) 62.03 (last 62.48): between;
// a decoder of one layer instead of two (as fast as 512) lost: 61.38 (last 61.42).
inline constexpr int64_t kFewPassesFfDivisor = 2;
// Under kSomePasses the small recipe's learning rate also decays linearly to zero at the end of
// the budget (`--schedule linear`, for --max-steps and --max-time), where it gives at least
// kLinearWarmups times the warm-up's updates (a budget no longer than the warm-up is refused).
// Measured (README, "Recipes"): on the messages corpus in 13 minutes +0.49 valid BLEU at ~8
// estimated passes and +1.11 at ~14 (61.31 -> 62.42, 95.6% of its ceiling then); on Ding at ~14
// passes -0.01 / +0.82 (two seeds), at ~18 -0.40 / +0.06, at ~29 -0.56 with dropout 0.2: the
// rate that ends with the budget gains where the run stops far from its plateau, not where it
// overfits.
inline constexpr double kLinearWarmups = 4;
// Far above: on Ding at 5,400 updates (~48 passes; a 2-core Xeon's 13 minutes in bf16 on AMX),
// all validation pairs, beam 4, three seeds, the small recipe with label smoothing 0.2 / 0.1:
// 8.44 / 7.95, 8.43 / 8.58 and 8.42 / 8.04 (+0.24 on average, two of three ahead; chrF +0.25).
// The small recipe takes 0.2 from here, between 29 passes (where 0.2 and 0.1 came out even over
// three seeds, 7.82 / 8.09, 8.10 / 8.15, 7.50 / 7.19) and 48.
inline constexpr double kMostPasses = 38;
// The large recipe's plateau on Ding (a GPU sweep, README): ~5,000 updates; with fewer, the
// small recipe's extra updates win.
inline constexpr double kLargeUpdates = 5000;

struct Recipe {
  std::string name;  // small | large
  // TrainConfig options (config.toml's keys, `rosetta train` flags without the dashes) and their
  // values as TOML writes them, strings quoted: {"d-model", "256"}, {"activation", "\"relu\""}.
  std::vector<std::pair<std::string, std::string>> settings;
  // For the log: the estimate and the rule that chose (without the settings).
  std::string reason;
};

// The settings of recipe `name` (small | large) for a budget of `passes` over the corpus (the
// regularization), of time where `time_budget` (the small one's batch under kFewPasses);
// `reason` is left empty. Throws naming --recipe for another name.
Recipe recipe_settings(const std::string& name, double passes, bool time_budget = false);

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

// The training tokens of a corpus of `bytes` (the longer side of each pair, summed): the
// 5,000-piece vocabularies take ~3 bytes per padded batch token on both measured corpora.
double estimated_tokens(double bytes);

// The training FLOPs of one update of recipe `name` relative to one of the small recipe's
// (large: ~8x), from their FLOPs per token and batch sizes.
double update_cost(const std::string& name);

}  // namespace rosetta::translator
