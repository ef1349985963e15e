// Recipes (translator/recipe.h): the settings of small and large, the regularization by the
// passes a budget gives, the estimate of those passes from the corpus and the budget, and when
// auto takes the large model.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "rosetta/core/io.h"
#include "rosetta/translator/recipe.h"
#include "support.h"

using namespace rosetta;
namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> settings(const translator::Recipe& r) {
  return {r.settings.begin(), r.settings.end()};
}

// A TSV of `pairs` pairs whose longer side has 30 bytes: 10 estimated tokens each.
struct Corpus {
  fs::path path = fs::temp_directory_path() / ("rosetta-test-recipe-" + std::to_string(::getpid()) + ".tsv");
  explicit Corpus(int pairs) {
    std::string text;
    for (int i = 0; i < pairs; ++i) text += "ein kurzer deutscher Satz " + std::to_string(1000 + i) + "\tshort\n";
    write_file_atomic(path.string(), text);
  }
  ~Corpus() { fs::remove(path); }
};

translator::TrainConfig config(const Corpus& corpus, const std::string& recipe) {
  translator::TrainConfig c;
  c.train = corpus.path.string();
  c.recipe = translator::parse_recipe_choice(recipe);
  return c;
}

}  // namespace

TEST_CASE("recipe_settings: the two sizes and the regularization by passes", "[train][recipe]") {
  auto small = settings(translator::recipe_settings("small", 9));
  CHECK(small["d-model"] == "256");
  CHECK(small["encoder-layers"] == "2");
  CHECK(small["activation"] == "\"relu\"");
  CHECK(small["dropout"] == "0.05");  // the fewest passes: the lightest dropout
  CHECK(small["label-smoothing"] == "0.1");
  CHECK(small["best-metric"] == "\"bleu\"");
  CHECK(small["schedule"] == "\"linear\"");  // few passes: the rate ends with the budget
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses - 1))["dropout"] == "0.05");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses - 1))["schedule"] == "\"linear\"");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses))["dropout"] == "0.1");
  CHECK(settings(translator::recipe_settings("small", translator::kSomePasses - 1))["dropout"] == "0.1");
  CHECK(settings(translator::recipe_settings("small", translator::kSomePasses - 1))["schedule"] == "\"linear\"");
  CHECK(settings(translator::recipe_settings("small", translator::kSomePasses)).count("schedule") == 0);
  CHECK(settings(translator::recipe_settings("small", translator::kSomePasses))["dropout"] == "0.15");
  CHECK(settings(translator::recipe_settings("small", translator::kManyPasses - 1))["dropout"] == "0.15");
  small = settings(translator::recipe_settings("small", translator::kManyPasses));
  CHECK(small["dropout"] == "0.2");
  CHECK(small["label-smoothing"] == "0.2");
  // Label smoothing 0.2 from kFewPasses, 0.1 under it.
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses - 1))["label-smoothing"] == "0.1");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses))["label-smoothing"] == "0.2");
  CHECK(settings(translator::recipe_settings("small", translator::kSomePasses))["label-smoothing"] == "0.2");
  // Few passes of a time budget: the small recipe halves its batch (not in a budget of updates,
  // not from kFewPasses, not the large recipe).
  CHECK(settings(translator::recipe_settings("small", 9, true))["max-tokens"] == "1250");
  CHECK(settings(translator::recipe_settings("small", 9, true))["warmup"] == "600");
  CHECK(settings(translator::recipe_settings("small", 9, true))["validate-every"] == "400");  // as often per token
  CHECK(settings(translator::recipe_settings("small", 9, true))["ff"] == "512");  // and a narrower feed-forward layer
  CHECK(settings(translator::recipe_settings("small", 9))["ff"] == "1024");
  CHECK(settings(translator::recipe_settings("small", 9)).count("validate-every") == 0);
  CHECK(settings(translator::recipe_settings("small", 9))["max-tokens"] == "2500");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses))["max-tokens"] == "2500");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses + 1, true))["max-tokens"] == "1250");
  CHECK(settings(translator::recipe_settings("small", translator::kFewPasses + 1, true))["dropout"] == "0.1");
  CHECK(settings(translator::recipe_settings("large", 9, true))["max-tokens"] == "4000");
  auto large = settings(translator::recipe_settings("large", 40));
  CHECK(large["d-model"] == "512");
  CHECK(large["activation"] == "\"gelu\"");
  CHECK(large["dropout"] == "0.4");
  CHECK(large["label-smoothing"] == "0.2");
  CHECK(large["max-tokens"] == "4000");
  CHECK(settings(translator::recipe_settings("large", 2))["dropout"] == "0.1");
  CHECK(settings(translator::recipe_settings("large", 2)).count("schedule") == 0);  // unmeasured
  CHECK(settings(translator::recipe_settings("large", 20))["dropout"] == "0.1");  // no middle step measured
  CHECK_THROWS_WITH(translator::recipe_settings("huge", 1), Catch::Contains("--recipe huge is not a recipe"));
  // The large model's update is ~8 of the small one's (5x the FLOPs per token, 1.6x the tokens).
  CHECK(translator::update_cost("small") == 1.0);
  CHECK(translator::update_cost("large") > 6);
  CHECK(translator::update_cost("large") < 10);
}

TEST_CASE("choose_recipe estimates the passes of --max-steps and --max-epochs", "[train][recipe]") {
  const Corpus corpus(2500);  // 25,000 estimated tokens: 10 updates of 2,500 tokens a pass
  translator::TrainConfig c = config(corpus, "auto");
  c.max_steps = 50;  // 5 passes
  translator::Recipe r = translator::choose_recipe(c);
  INFO(r.reason);
  CHECK(r.name == "small");
  CHECK(settings(r)["dropout"] == "0.05");
  CHECK_THAT(r.reason, Catch::Contains("--max-steps 50 give ~50 updates, ~5 passes over ~25000 tokens of 2500 pairs"));
  c.max_steps = 400;  // 40 passes
  r = translator::choose_recipe(c);
  CHECK(r.name == "small");
  CHECK(settings(r)["dropout"] == "0.2");
  c.max_steps = 0;
  c.max_epochs = 10;  // below kFewPasses: the lightest setting
  r = translator::choose_recipe(c);
  CHECK_THAT(r.reason, Catch::Contains("--max-epochs 10 give ~100 updates, ~10 passes"));
  CHECK(settings(r)["dropout"] == "0.05");
  c.max_epochs = 14;  // between kFewPasses and kSomePasses: the light setting
  r = translator::choose_recipe(c);
  CHECK_THAT(r.reason, Catch::Contains("--max-epochs 14 give ~140 updates, ~14 passes"));
  CHECK(settings(r)["dropout"] == "0.1");
  c.max_epochs = 20;  // between kSomePasses and kManyPasses
  r = translator::choose_recipe(c);
  CHECK_THAT(r.reason, Catch::Contains("--max-epochs 20 give ~200 updates, ~20 passes"));
  CHECK(settings(r)["dropout"] == "0.15");
  c.max_epochs = 30;
  r = translator::choose_recipe(c);
  CHECK_THAT(r.reason, Catch::Contains("--max-epochs 30 give ~300 updates, ~30 passes"));
  CHECK(settings(r)["dropout"] == "0.2");
  CHECK(settings(r)["label-smoothing"] == "0.2");
  CHECK(settings(r)["best-metric"] == "\"bleu\"");
  c.valid_bleu_sentences = 0;  // no validation BLEU: best.safetensors stays by loss
  CHECK(settings(translator::choose_recipe(c)).count("best-metric") == 0);
  c.valid_bleu_sentences = 300;
  c.train_repeat = 2;  // each pass is twice the tokens
  c.max_epochs = 0;
  c.max_steps = 100;
  CHECK_THAT(translator::choose_recipe(c).reason, Catch::Contains("~5 passes over ~50000 tokens"));
}

TEST_CASE("choose_recipe: the linear schedule for few passes of a budget by updates or time", "[train][recipe]") {
  const Corpus corpus(2500);
  translator::TrainConfig c = config(corpus, "auto");
  c.train_repeat = 40;  // 1,000,000 estimated tokens: 400 updates a pass
  c.max_steps = 4000;   // 10 passes
  translator::Recipe r = translator::choose_recipe(c);
  INFO(r.reason);
  CHECK(settings(r)["dropout"] == "0.05");
  CHECK(settings(r)["schedule"] == "\"linear\"");
  c.train_repeat = 10;  // 250,000 tokens (under Ding's scale), 2,000 updates: 20 passes, inverse-sqrt
  c.max_steps = 2000;
  CHECK(settings(translator::choose_recipe(c)).count("schedule") == 0);
  c.train_repeat = 20;  // 20 passes over 500,000 tokens count as ~12 at Ding's scale: linear
  c.max_steps = 4000;
  CHECK(settings(translator::choose_recipe(c))["schedule"] == "\"linear\"");
  c.train_repeat = 40;
  // A budget of fewer than 4 x its warm-up's updates shortens the recipe's warm-up to a quarter
  // of it (1,000 < 4 x 300: 250), so that the rate still decays, without a step at the threshold;
  // a warm-up the user gave stays, and without that room the rate keeps its inverse-sqrt decay.
  c.max_steps = 1000;
  r = translator::choose_recipe(c);
  CHECK(settings(r)["schedule"] == "\"linear\"");
  CHECK(settings(r)["warmup"] == "250");
  c.max_steps = 1199;
  CHECK(settings(translator::choose_recipe(c))["warmup"] == "299");
  c.max_steps = 2000;
  r = translator::choose_recipe(c);
  CHECK(settings(r)["schedule"] == "\"linear\"");
  CHECK(settings(r)["warmup"] == "300");
  c.warmup = "600";  // given: 2,000 < 4 x 600
  CHECK(settings(translator::choose_recipe(c, {"warmup"})).count("schedule") == 0);
  c.warmup = "5%";  // a share of the budget always leaves room
  CHECK(settings(translator::choose_recipe(c, {"warmup"}))["schedule"] == "\"linear\"");
  // --max-epochs first, or alone: the linear schedule would not end with the run.
  c.warmup = "300";
  c.max_epochs = 4;  // 1,600 updates, before --max-steps 2000
  CHECK(settings(translator::choose_recipe(c)).count("schedule") == 0);
  c.max_epochs = 10;  // after
  CHECK(settings(translator::choose_recipe(c))["schedule"] == "\"linear\"");
  c.max_steps = 0;
  r = translator::choose_recipe(c);
  CHECK(settings(r)["dropout"] == "0.05");
  CHECK(settings(r).count("schedule") == 0);
}

TEST_CASE("choose_recipe: auto takes the large model only for enough updates", "[train][recipe]") {
  const Corpus corpus(2500);
  translator::TrainConfig c = config(corpus, "auto");
  c.max_steps = int64_t(translator::kLargeUpdates) - 1;
  CHECK(translator::choose_recipe(c).name == "small");
  c.max_steps = int64_t(translator::kLargeUpdates);
  const translator::Recipe large = translator::choose_recipe(c);
  CHECK(large.name == "large");
  CHECK(settings(large)["dropout"] == "0.4");  // 5,000 x 4,000 tokens: 800 passes
  // A fixed recipe is taken whatever the budget.
  c.recipe = translator::RecipeChoice::small;
  CHECK(translator::choose_recipe(c).name == "small");
  // No budget at all (a run that early stopping ends): unlimited updates, the
  // large model with its strong regularization.
  c.recipe = translator::RecipeChoice::automatic;
  c.max_steps = 0;
  const translator::Recipe open = translator::choose_recipe(c);
  CHECK(open.name == "large");
  CHECK(settings(open)["dropout"] == "0.4");
  CHECK_THAT(open.reason, Catch::Contains("no budget but early stopping (after 10 validations without improvement) "
                                          "give unlimited updates, unlimited passes"));
  // Early stopping by default without a budget only: a budget trains to its end.
  CHECK(c.early_stopping_validations() == translator::kDefaultEarlyStopping);
  c.max_time = "13m";
  CHECK(c.early_stopping_validations() == 0);
  c.early_stopping = 3;  // given: whatever the budget
  CHECK(c.early_stopping_validations() == 3);
  c.max_time = "";
  CHECK(c.early_stopping_validations() == 3);
  c.early_stopping = 0;  // a run to be stopped by hand: the same rule
  CHECK(translator::choose_recipe(c).name == "large");
  CHECK_THAT(translator::choose_recipe(c).reason, Catch::Contains("no budget give unlimited updates"));
}

TEST_CASE("choose_recipe counts in a given batch and warm-up", "[train][recipe]") {
  const Corpus corpus(2500);  // 25,000 estimated tokens
  translator::TrainConfig c = config(corpus, "auto");
  c.max_steps = 100;
  c.max_tokens = 1250;
  // Not given (a library caller's default set): the recipe's 2,500-token batches, 10 passes.
  CHECK_THAT(translator::choose_recipe(c).reason, Catch::Contains("~100 updates, ~10 passes"));
  // Given: half the tokens per update, half the passes.
  const translator::Recipe r = translator::choose_recipe(c, {"max-tokens"});
  INFO(r.reason);
  CHECK_THAT(r.reason, Catch::Contains("~100 updates, ~5 passes"));
  // The large model's 5,000 updates are of 4,000 tokens: of 2,000, it needs twice as many.
  c.max_steps = int64_t(translator::kLargeUpdates);
  c.max_tokens = 2000;
  CHECK(translator::choose_recipe(c).name == "large");
  CHECK(translator::choose_recipe(c, {"max-tokens"}).name == "small");
  c.max_steps = 2 * int64_t(translator::kLargeUpdates);
  CHECK(translator::choose_recipe(c, {"max-tokens"}).name == "large");
  // A given warm-up shorter than the recipe's leaves the linear schedule room in a shorter budget
  // (4 x 200 <= 1,000 < 4 x 300).
  c.train_repeat = 40;  // 1,000,000 estimated tokens: few passes
  c.max_steps = 1000;
  c.warmup = "200";
  CHECK(settings(translator::choose_recipe(c, {"warmup"}))["schedule"] == "\"linear\"");
  CHECK(settings(translator::choose_recipe(c, {"warmup"})).count("warmup") == 1);  // (the CLI keeps a given one)
  CHECK(settings(translator::choose_recipe(c))["warmup"] == "250");  // not given: the recipe's 300, shortened
}

TEST_CASE("choose_recipe times this machine for --max-time", "[train][recipe]") {
  const Corpus corpus(2500);
  translator::TrainConfig c = config(corpus, "auto");
  c.vocab_size = 200;  // a quick probe
  c.threads = 1;
  c.max_time = "2s";
  const translator::Recipe r = translator::choose_recipe(c);
  INFO(r.reason);
  CHECK(r.name == "small");  // no machine gives the large model 5,000 updates in 2 seconds
  CHECK_THAT(r.reason, Catch::Contains("--max-time 2s at") && Catch::Contains("updates/s of the small model (timed here)"));
  CHECK(settings(r)["dropout"] == "0.05");  // nor 12 passes
  // Few passes of a time budget: half batches, twice the updates, the same warm-up tokens (600,
  // here shortened to a quarter of the few updates 2 seconds give, for the linear schedule).
  CHECK(settings(r)["max-tokens"] == "1250");
  CHECK(settings(r)["schedule"] == "\"linear\"");
  CHECK(std::stoi(settings(r)["warmup"]) < 600);
  CHECK_THAT(r.reason, Catch::Contains("updates of 1250 tokens"));
  // A given batch is the user's: the recipe's own, and its warm-up, as for a budget of updates.
  const translator::Recipe kept = translator::choose_recipe(c, {"max-tokens"});
  CHECK(std::stoi(settings(kept)["warmup"]) < 300);
  CHECK_THAT(kept.reason, !Catch::Contains("updates of 1250 tokens"));
  // Each process of a job would time its own machine and could choose differently.
  c.distributed = true;
  CHECK_THROWS_WITH(translator::choose_recipe(c), Catch::Contains("give --max-steps"));
  c.max_steps = 100;
  CHECK_NOTHROW(translator::choose_recipe(c));
}

TEST_CASE("choose_recipe refuses none and names a corpus it cannot read", "[train][recipe]") {
  const Corpus corpus(10);
  translator::TrainConfig c = config(corpus, "none");
  CHECK_THROWS_WITH(translator::choose_recipe(c), Catch::Contains("--recipe none"));
  c.recipe = translator::RecipeChoice::automatic;
  c.train = "/nonexistent/train.tsv";
  CHECK_THROWS_WITH(translator::choose_recipe(c), Catch::Contains("/nonexistent/train.tsv"));
}

TEST_CASE("recipe_for_budget decides in the units of the run it sets, without steps", "[train][recipe]") {
  using translator::Budget;
  translator::TrainConfig c;
  // A time budget of ~10 passes of the small model's own shape (1,100 updates of 2,500 tokens):
  // the few-passes shape trains ~2.5x the updates (half the batch, a narrower layer) and ~1.27x
  // the passes, and its linear schedule's warm-up (600) is counted in those updates.
  const translator::Recipe few = translator::recipe_for_budget("small", {1100, 10, Budget::Limit::time}, c);
  INFO(few.reason);
  CHECK(settings(few)["max-tokens"] == "1250");
  CHECK(settings(few)["schedule"] == "\"linear\"");
  CHECK(settings(few)["warmup"] == "600");  // ~2,790 updates of 1,250 tokens leave 4 warm-ups
  CHECK_THAT(few.reason, Catch::Contains("~2791 updates of 1250 tokens") && Catch::Contains("~13 passes"));
  CHECK(settings(few)["dropout"] == "0.1");  // by the ~13 passes the run makes
  // The same budget of updates (--max-steps) keeps the shape: its 1,100 updates, its 10 passes.
  const translator::Recipe steps = translator::recipe_for_budget("small", {1100, 10, Budget::Limit::steps}, c);
  CHECK(settings(steps)["max-tokens"] == "2500");
  CHECK(settings(steps)["warmup"] == "275");  // 1,100 < 4 x 300
  CHECK(settings(steps)["dropout"] == "0.05");
  // Around the threshold of 4 warm-ups the warm-up moves with the budget, and the schedule stays:
  // a machine a few percent slower gets a slightly shorter warm-up, not another schedule.
  for (double updates = 1000; updates <= 1400; updates += 10) {
    auto r = settings(translator::recipe_for_budget("small", {updates, 12, Budget::Limit::steps}, c));
    CHECK(r["schedule"] == "\"linear\"");
    CHECK(std::stod(r["warmup"]) == std::min(300.0, std::floor(updates / translator::kLinearWarmups)));
  }
  for (double updates = 800; updates <= 1000; updates += 10) {  // the few-passes shape's 600
    auto r = settings(translator::recipe_for_budget("small", {updates, 9, Budget::Limit::time}, c));
    CHECK(r["schedule"] == "\"linear\"");
    CHECK(std::stod(r["warmup"]) <= 600);
    CHECK(std::stod(r["warmup"]) >= 500);
  }
  // --max-epochs does not end a linear schedule: the inverse-sqrt decay.
  CHECK(settings(translator::recipe_for_budget("small", {1100, 10, Budget::Limit::epochs}, c)).count("schedule") == 0);
}

TEST_CASE("recipe_by_default: auto for a budget without model or regularization options", "[train][recipe]") {
  translator::TrainConfig c;
  c.train = "train.tsv";
  CHECK_FALSE(translator::recipe_by_default(c, {}));  // no budget: the options as given
  c.max_time = "13m";
  CHECK(translator::recipe_by_default(c, {"train", "valid", "out", "max-time"}));
  CHECK(translator::recipe_by_default(c, {"max-time", "lr", "warmup", "max-tokens", "seed", "threads"}));
  for (const char* key : {"recipe", "d-model", "ff", "dropout", "label-smoothing", "word-dropout", "activation", "norm"}) {
    INFO(key);
    CHECK_FALSE(translator::recipe_by_default(c, {"max-time", key}));
  }
  c.max_time.clear();
  c.max_steps = 3000;
  CHECK(translator::recipe_by_default(c, {"max-steps"}));
  c.max_steps = 0;
  c.max_epochs = 20;
  CHECK(translator::recipe_by_default(c, {"max-epochs"}));
  c.task = translator::Task::copy;  // no corpus to count passes over
  CHECK_FALSE(translator::recipe_by_default(c, {"max-epochs"}));
  c.task = translator::Task::translate;
  c.resume = "runs/r";  // a resumed run's config.toml holds every option
  CHECK_FALSE(translator::recipe_by_default(c, {"max-epochs"}));
}

TEST_CASE("recipe_for_budget counts a larger corpus's passes at Ding's scale for the regularization", "[train][recipe]") {
  using translator::Budget;
  translator::TrainConfig c;
  const auto at = [&c](double passes, double tokens) {
    return translator::recipe_for_budget("small", {8000, passes, Budget::Limit::steps, tokens}, c);
  };
  // ~21 passes of Ding's size: dropout 0.15 and the inverse-sqrt decay (16-25 passes).
  CHECK(settings(at(21.4, translator::kReferenceTokens))["dropout"] == "0.15");
  CHECK(settings(at(21.4, translator::kReferenceTokens)).count("schedule") == 0);
  CHECK(settings(at(21.4, 0))["dropout"] == "0.15");  // size not known: the passes as made
  // The same passes over the messages corpus (~934k tokens) count as ~6.9: dropout 0.05 and the
  // linear decay, as measured there; the log says so.
  const translator::Recipe messages = at(21.4, 933640);
  INFO(messages.reason);
  CHECK(settings(messages)["dropout"] == "0.05");
  CHECK(settings(messages)["schedule"] == "\"linear\"");
  CHECK_THAT(messages.reason, Catch::Contains("~21 passes (~7 at the scale of 300000 tokens"));
  // A smaller corpus keeps its passes, and so its regularization.
  CHECK(settings(at(21.4, 100000))["dropout"] == "0.15");
  // In a time budget the log gives both figures for the shape the run trains with too.
  const translator::Recipe few = translator::recipe_for_budget("small", {3500, 30, Budget::Limit::time, 933640}, c);
  INFO(few.reason);
  CHECK(settings(few)["max-tokens"] == "1250");
  CHECK_THAT(few.reason, Catch::Contains("the small model ~30 passes (~10 at the scale of 300000 tokens); in a time "
                                         "budget a smaller batch and model: ~8881 updates of 1250 tokens with a "
                                         "feed-forward width of 512, ~38 passes (~12 at the scale of 300000 tokens)"));
}

TEST_CASE("recipe_for_budget: a time budget trains the few-passes shape at any passes, without a step", "[train][recipe]") {
  using translator::Budget;
  translator::TrainConfig c;
  // A time budget of the small model's own 2,500-token updates, from a few passes of them to many:
  // always the few-passes shape, its regularization by the passes that shape makes (~1.27x), so
  // that a machine a few percent faster or slower never changes the shape and changes the
  // regularization only at its thresholds.
  const auto timed = [&c](double passes) {
    const double tokens = translator::kReferenceTokens;
    return translator::recipe_for_budget("small", {passes * tokens / 2500, passes, Budget::Limit::time, tokens}, c);
  };
  double dropout = 0;
  for (double passes = 2; passes <= 120; passes *= 1.1) {
    INFO(passes);
    const translator::Recipe recipe = timed(passes);
    auto r = settings(recipe);
    CHECK(r["max-tokens"] == "1250");
    CHECK(r["ff"] == "512");
    CHECK_THAT(recipe.reason, Catch::Contains("updates of 1250 tokens"));
    CHECK(std::stod(r["dropout"]) >= dropout);  // the more passes, never the lighter setting
    dropout = std::stod(r["dropout"]);
  }
  // From ~20 passes of the own shape (25 of the few-passes one): dropout 0.2, smoothing 0.2, the
  // inverse-sqrt decay.
  for (double passes : {20.0, 30.0, 48.0, 100.0}) {
    auto r = settings(timed(passes));
    CHECK(r["dropout"] == "0.2");
    CHECK(r["label-smoothing"] == "0.2");
    CHECK(r.count("schedule") == 0);
  }
  // A budget of updates keeps the whole batch at any passes.
  CHECK(settings(translator::recipe_for_budget("small", {1100, 10, Budget::Limit::steps}, c))["max-tokens"] == "2500");
}
