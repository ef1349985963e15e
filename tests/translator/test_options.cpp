// The enum options (core/enum_names.h): every word parses to its value and back, an unknown word
// is one line naming it and the choices, and the words are those the command line, config.toml,
// checkpoints and train.log have always used.
#include <catch2/catch.hpp>

#include <set>
#include <type_traits>

#include "rosetta/core/cpu.h"
#include "rosetta/data/tokenizer.h"
#include "rosetta/nn/layers.h"
#include "rosetta/optim/schedule.h"
#include "rosetta/translator/config.h"
#include "rosetta/translator/run.h"

using namespace rosetta;
using namespace rosetta::translator;

namespace {

// Every value of E has one word, the words are distinct, and each round-trips both ways.
template <class E>
std::vector<std::string> round_trip() {
  const std::vector<std::string> words = enum_words<E>();
  REQUIRE(std::set<std::string>(words.begin(), words.end()).size() == words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    CAPTURE(words[i]);
    const E value = parse_enum<E>(words[i]);
    REQUIRE(static_cast<size_t>(value) == i);  // the list is in the enum's order
    REQUIRE(enum_name(value) == words[i]);
  }
  return words;
}

// The error for an unknown word: exactly `message`, one line.
template <class F>
void require_unknown(F parse, const std::string& message) {
  REQUIRE_THROWS_AS(parse(), Error);
  REQUIRE_THROWS_WITH(parse(), message);
  REQUIRE(message.find('\n') == std::string::npos);
}

using Words = std::vector<std::string>;

}  // namespace

TEST_CASE("options: each enum's words round-trip, in the order of the help", "[config][options]") {
  REQUIRE(round_trip<Task>() == Words{"translate", "copy"});
  REQUIRE(round_trip<RecipeChoice>() == Words{"none", "auto", "small", "large"});
  REQUIRE(round_trip<OptimizerKind>() == Words{"adam", "adamw", "sgd"});
  REQUIRE(round_trip<BestMetric>() == Words{"loss", "bleu", "chrf"});
  REQUIRE(round_trip<OnNonfinite>() == Words{"skip", "stop"});
  REQUIRE(round_trip<StopReason>() == Words{"max-steps", "max-epochs", "max-time", "early-stopping", "interrupted"});
  REQUIRE(round_trip<optim::ScheduleKind>() == Words{"constant", "noam", "inverse-sqrt", "linear", "cosine"});
  REQUIRE(round_trip<data::TokenizerModel>() == Words{"unigram", "bpe"});
  REQUIRE(round_trip<nn::Activation>() == Words{"relu", "gelu"});
  REQUIRE(round_trip<Precision>() == Words{"fp32", "bf16", "int8"});
  REQUIRE(round_trip<PrecisionChoice>() == Words{"fp32", "bf16", "int8", "auto"});
}

TEST_CASE("options: the named parse and name functions agree with the lists", "[config][options]") {
  REQUIRE(parse_task("copy") == Task::copy);
  REQUIRE(std::string(task_name(Task::translate)) == "translate");
  REQUIRE(parse_recipe_choice("auto") == RecipeChoice::automatic);
  REQUIRE(std::string(recipe_choice_name(RecipeChoice::large)) == "large");
  REQUIRE(parse_optimizer_kind("adamw") == OptimizerKind::adamw);
  REQUIRE(std::string(optimizer_kind_name(OptimizerKind::sgd)) == "sgd");
  REQUIRE(parse_best_metric("chrf") == BestMetric::chrf);
  REQUIRE(std::string(best_metric_name(BestMetric::bleu)) == "bleu");
  REQUIRE(parse_on_nonfinite("stop") == OnNonfinite::stop);
  REQUIRE(std::string(on_nonfinite_name(OnNonfinite::skip)) == "skip");
  REQUIRE(parse_stop_reason("early-stopping") == StopReason::early_stopping);
  REQUIRE(std::string(stop_reason_name(StopReason::max_time)) == "max-time");
  REQUIRE(optim::parse_schedule_kind("inverse-sqrt") == optim::ScheduleKind::inverse_sqrt);
  REQUIRE(std::string(optim::schedule_kind_name(optim::ScheduleKind::cosine)) == "cosine");
  REQUIRE(data::parse_tokenizer_model("bpe") == data::TokenizerModel::bpe);
  REQUIRE(std::string(data::tokenizer_model_name(data::TokenizerModel::unigram)) == "unigram");
  REQUIRE(nn::parse_activation("gelu") == nn::Activation::gelu);
  REQUIRE(std::string(nn::activation_name(nn::Activation::relu)) == "relu");
  REQUIRE(parse_precision("bf16") == Precision::bf16);
  REQUIRE(std::string(precision_name(Precision::int8)) == "int8");
  REQUIRE(parse_precision_choice("auto") == PrecisionChoice::automatic);
  REQUIRE(std::string(precision_choice_name(PrecisionChoice::fp32)) == "fp32");
}

TEST_CASE("options: an unknown word is one line naming it and the choices", "[config][options]") {
  require_unknown([] { return parse_best_metric("blue"); }, "unknown metric 'blue' (loss, bleu or chrf)");
  require_unknown([] { return parse_task("Copy"); }, "unknown task 'Copy' (translate or copy)");
  require_unknown([] { return parse_recipe_choice("medium"); }, "unknown recipe 'medium' (none, auto, small or large)");
  require_unknown([] { return parse_optimizer_kind("adagrad"); }, "unknown optimizer 'adagrad' (adam, adamw or sgd)");
  require_unknown([] { return parse_on_nonfinite(""); }, "unknown non-finite policy '' (skip or stop)");
  require_unknown([] { return parse_stop_reason("max_steps"); },
                  "unknown stop reason 'max_steps' (max-steps, max-epochs, max-time, early-stopping or interrupted)");
  require_unknown([] { return optim::parse_schedule_kind("warmup-linear"); },
                  "unknown schedule 'warmup-linear' (constant, noam, inverse-sqrt, linear or cosine)");
  require_unknown([] { return data::parse_tokenizer_model("wordpiece"); },
                  "unknown tokenizer 'wordpiece' (unigram or bpe)");
  require_unknown([] { return nn::parse_activation("swish"); }, "unknown activation 'swish' (relu or gelu)");
  // Precision's messages as they were before the lists.
  require_unknown([] { return parse_precision("fp16"); }, "unknown precision 'fp16' (fp32, bf16 or int8)");
  require_unknown([] { return resolve_precision("fp16"); }, "unknown precision 'fp16' (fp32, bf16, int8 or auto)");
}

TEST_CASE("options: a value outside an enum's list is named, not read past", "[config][options]") {
  REQUIRE_THROWS_WITH(enum_name(static_cast<BestMetric>(7)), "no metric has the value 7");
}

TEST_CASE("options: every choice an enum option of `rosetta train` offers parses", "[config][options]") {
  TrainConfig c;
  int enums = 0;
  TrainConfig::for_each_field(c, [&](auto& value, const ConfigField& f) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_enum_v<T>) {
      ++enums;
      CAPTURE(f.key);
      for (const std::string& word : f.choices.empty() ? enum_words<T>() : f.choices)
        REQUIRE(enum_name(parse_enum<T>(word)) == word);
      // The default is one of the choices.
      const std::vector<std::string> choices = f.choices.empty() ? enum_words<T>() : f.choices;
      REQUIRE(std::find(choices.begin(), choices.end(), enum_name(value)) != choices.end());
    } else if constexpr (std::is_same_v<T, std::string>) {
      REQUIRE(f.choices.empty());  // a word option is an enum
    }
  });
  REQUIRE(enums == 8);  // task, tokenizer, recipe, optimizer, schedule, best_metric, precision, on_nonfinite
  // Training takes fp32, bf16 or auto; int8 is for decoding.
  c.precision = PrecisionChoice::int8;
  c.task = Task::copy;
  REQUIRE_THROWS_WITH(c.validate(), Catch::StartsWith("--precision int8 is for decoding"));
}
