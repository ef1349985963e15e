// The model flags of `rosetta train` come from nn::TransformerOptions' list of options: each
// reaches its option, the defaults are the translator's, and messages name the flags.
#include <catch2/catch.hpp>

#include "train_config.h"

using rosetta::cli::TrainConfig;

namespace {
// The model options a `rosetta train` command line gives, for vocabularies of 50 and 60.
std::map<std::string, std::string> model_metadata(const std::string& flags) {
  TrainConfig c;
  CLI::App cmd("test");
  rosetta::cli::add_train_options(cmd, c);
  cmd.parse(flags);
  c.validate();
  return c.model_options(50, 60).to_metadata();
}
}  // namespace

TEST_CASE("train config: every model flag sets its option", "[config]") {
  const auto meta = model_metadata(
      "--task copy --d-model 48 --heads 3 --ff 96 --encoder-layers 1 --decoder-layers 4 --dropout 0.3 "
      "--attention-dropout 0.05 --activation-dropout 0 --norm post --activation gelu --share-embeddings false "
      "--tie-output false --max-len 64");
  const std::map<std::string, std::string> expected = {
      {"model.src_vocab", "50"},       {"model.tgt_vocab", "60"},
      {"model.d_model", "48"},         {"model.heads", "3"},
      {"model.ff", "96"},              {"model.encoder_layers", "1"},
      {"model.decoder_layers", "4"},   {"model.dropout", "0.29999999999999999"},
      {"model.attention_dropout", "0.050000000000000003"},
      {"model.activation_dropout", "0"},
      {"model.norm_first", "false"},   {"model.activation", "gelu"},
      {"model.share_embeddings", "false"}, {"model.tie_output", "false"},
      {"model.max_len", "64"},         {"model.pad_id", "0"},
      {"model.layer_norm_eps", "1.0000000000000001e-05"}};
  REQUIRE(meta == expected);
}

TEST_CASE("train config: the model defaults are the default translator's", "[config]") {
  auto meta = model_metadata("--task copy");
  // Shared embeddings need equal vocabularies: 50 and 60 turn them off; 60 and 60 keep them.
  REQUIRE(meta.at("model.share_embeddings") == "false");
  TrainConfig c;
  meta = c.model_options(60, 60).to_metadata();
  REQUIRE(meta.at("model.share_embeddings") == "true");
  REQUIRE(meta.at("model.d_model") == "256");
  REQUIRE(meta.at("model.heads") == "4");
  REQUIRE(meta.at("model.ff") == "1024");
  REQUIRE(meta.at("model.encoder_layers") == "2");
  REQUIRE(meta.at("model.decoder_layers") == "2");
  REQUIRE(meta.at("model.dropout") == "0.10000000000000001");
  REQUIRE(meta.at("model.attention_dropout") == meta.at("model.dropout"));
  REQUIRE(meta.at("model.norm_first") == "true");
  REQUIRE(meta.at("model.activation") == "relu");
  REQUIRE(meta.at("model.tie_output") == "true");
  REQUIRE(meta.at("model.max_len") == "256");
}

TEST_CASE("train config: model errors name the flags", "[config]") {
  REQUIRE_THROWS_WITH(model_metadata("--task copy --d-model 30 --heads 4"),
                      "--d-model 30 is not divisible by --heads 4");
  REQUIRE_THROWS_WITH(model_metadata("--task copy --encoder-layers 0"), "--encoder-layers must be positive, got 0");
  REQUIRE_THROWS_WITH(model_metadata("--task copy --activation-dropout 1"), "--activation-dropout 1 outside [0, 1)");
  // The choices are checked by the command line, as before.
  REQUIRE_THROWS_AS(model_metadata("--task copy --norm middle"), CLI::ValidationError);
  REQUIRE_THROWS_AS(model_metadata("--task copy --activation swish"), CLI::ValidationError);
}

TEST_CASE("train config: enum options read and write their words, as text options did", "[config]") {
  TrainConfig c;
  CLI::App cmd("test");
  cmd.option_defaults()->always_capture_default();
  rosetta::cli::add_train_options(cmd, c);
  // The help shows the words and the default's word.
  const std::string help = cmd.help();
  REQUIRE_THAT(help, Catch::Contains("--schedule TEXT:{constant,noam,inverse-sqrt,linear,cosine}=inverse-sqrt"));
  REQUIRE_THAT(help, Catch::Contains("--precision TEXT:{fp32,bf16,auto}=auto"));
  REQUIRE_THAT(help, Catch::Contains("--activation TEXT:{relu,gelu}=relu"));
  cmd.parse("--task copy --schedule cosine --best-metric chrf --on-nonfinite stop --activation gelu --max-steps 9");
  REQUIRE(c.task == rosetta::translator::Task::copy);
  REQUIRE(c.schedule == rosetta::optim::ScheduleKind::cosine);
  REQUIRE(c.best_metric == rosetta::translator::BestMetric::chrf);
  REQUIRE(c.on_nonfinite == rosetta::translator::OnNonfinite::stop);
  REQUIRE(c.model.activation() == rosetta::nn::Activation::gelu);
  // config.toml: given words and defaults alike, quoted as strings.
  const std::string toml = cmd.config_to_str(true, false);
  REQUIRE_THAT(toml, Catch::Contains("\nschedule=\"cosine\"\n") && Catch::Contains("\noptimizer=\"adam\"\n") &&
                         Catch::Contains("\nactivation=\"gelu\"\n") && Catch::Contains("\nprecision=\"auto\"\n"));
  // A file's words go through the same check.
  TrainConfig d;
  CLI::App again("test");
  rosetta::cli::add_train_options(again, d);
  again.parse(std::vector<std::string>{});
  rosetta::cli::apply_config_toml(again, "optimizer = \"sgd\"\ntokenizer = \"bpe\"\n", "c.toml");
  REQUIRE(d.optimizer == rosetta::translator::OptimizerKind::sgd);
  REQUIRE(d.tokenizer == rosetta::data::TokenizerModel::bpe);
  REQUIRE_THROWS_WITH(rosetta::cli::apply_config_toml(again, "best-metric = \"blue\"\n", "c.toml"),
                      Catch::Equals("c.toml: best-metric: --best-metric: blue not in {loss,bleu,chrf}"));
  // int8 is a word of PrecisionChoice, but not a choice of training.
  CLI::App third("test");
  TrainConfig e;
  rosetta::cli::add_train_options(third, e);
  REQUIRE_THROWS_AS(third.parse("--precision int8"), CLI::ValidationError);
}
