// The low-resource levers of `rosetta train` end to end: extra tagged pairs, word dropout,
// sampled segmentations and the moving average of the weights resume bit for bit; the best
// checkpoint follows --best-metric; weight snapshots are kept and pruned.
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "rosetta/core/safetensors.h"

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::read_jsonl;
using rosetta::test::run_rosetta;
using rosetta::test::train_losses;
using rosetta::test::slurp;
using nlohmann::json;

namespace {



const char* kToyFlags =
    "--d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 --vocab-size 60 "
    "--max-tokens 256 --lr 2e-3 --warmup 20 --dropout 0.1 --threads 1 --log-every 1 "
    "--valid-bleu-sentences 20";

}  // namespace

TEST_CASE("levers: noise, extra pairs and EMA resume bit for bit", "[cli][levers]") {
  TempDir work("levers");
  rosetta::test::write_tsv(work / "train.tsv", rosetta::test::toy_corpus(300, 1));
  rosetta::test::write_tsv(work / "valid.tsv", rosetta::test::toy_corpus(30, 2));
  rosetta::test::write_tsv(work / "extra.tsv", rosetta::test::toy_corpus(200, 3));
  const std::string data = " --train " + (work / "train.tsv") + " --valid " + (work / "valid.tsv") + " " + kToyFlags +
                           " --validate-every 20 --save-every 10 ";
  const std::string levers = " --word-dropout 0.1 --sp-nbest 4 --sp-alpha 0.5 --extra-train " + (work / "extra.tsv") +
                             " --extra-max 150 --ema 0.9 --keep-checkpoints 2 ";

  RunResult r = run_rosetta("train " + data + levers + " --max-steps 40 --out " + (work / "straight"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("extra training pairs: 150 of 200"));
  REQUIRE_THAT(r.output, Catch::Contains("subword regularization"));
  r = run_rosetta("train " + data + levers + " --max-steps 25 --out " + (work / "resumed"));
  REQUIRE(r.exit_code == 0);
  r = run_rosetta("train --resume " + (work / "resumed") + " --max-steps 40");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("resumed at step 25"));

  const auto straight = train_losses(read_jsonl(work / "straight/metrics.jsonl"));
  REQUIRE(straight.size() == 40);
  CHECK(straight == train_losses(read_jsonl(work / "resumed/metrics.jsonl")));
  // The moving average resumed too: the EMA weights at step 40 are the same bytes.
  CHECK(slurp(work / "straight/ema.safetensors") == slurp(work / "resumed/ema.safetensors"));
  // Two snapshots kept, the newest.
  namespace fs = rosetta::test::fs;
  CHECK(fs::exists(work / "straight/step-30.safetensors"));
  CHECK(fs::exists(work / "straight/step-40.safetensors"));
  CHECK_FALSE(fs::exists(work / "straight/step-20.safetensors"));
  // The EMA is not the last weights, and validation saw it: best.safetensors holds EMA weights.
  CHECK(slurp(work / "straight/ema.safetensors") != slurp(work / "straight/step-40.safetensors"));

  // The levers change training: without them the trajectory is another one.
  r = run_rosetta("train " + data + " --max-steps 40 --out " + (work / "plain"));
  REQUIRE(r.exit_code == 0);
  const auto plain = train_losses(read_jsonl(work / "plain/metrics.jsonl"));
  REQUIRE(plain.size() == 40);
  CHECK(plain != straight);
}

TEST_CASE("levers: best.safetensors follows --best-metric", "[cli][levers]") {
  TempDir work("best");
  const std::string flags =
      "--task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 --max-tokens 1024 "
      "--lr 3e-3 --warmup 50 --dropout 0 --label-smoothing 0 --copy-symbols 8 --copy-min-len 3 --copy-max-len 6 "
      "--copy-train-size 3000 --threads 1 --log-every 50 --max-steps 240 --validate-every 20 --save-every 0 ";
  for (const std::string metric : {"loss", "bleu", "chrf"}) {
    const std::string dir = work / metric;
    const RunResult r = run_rosetta("train " + flags + "--best-metric " + metric + " --out " + dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // The step of the best value (the first, on ties) among the validations...
    int64_t best_step = -1;
    double best = 0;
    for (const auto& j : read_jsonl(dir + "/metrics.jsonl")) {
      if (j["kind"] != "valid") continue;
      const double v = j[metric].get<double>();
      const bool better = metric == "loss" ? v < best : v > best;
      if (best_step < 0 || better) best = v, best_step = j["step"].get<int64_t>();
    }
    // ... is the step best.safetensors was saved at.
    const auto st = rosetta::load_safetensors(dir + "/best.safetensors");
    INFO(metric << ": best at step " << best_step);
    CHECK(st.metadata.at("train.step") == std::to_string(best_step));
  }
}

TEST_CASE("levers: bad values are named before anything is written", "[cli][levers]") {
  TempDir work("levers_bad");
  rosetta::test::write_tsv(work / "train.tsv", rosetta::test::toy_corpus(50, 1));
  const std::string train = "train --train " + (work / "train.tsv") + " --out " + (work / "run") + " ";
  const std::pair<const char*, const char*> cases[] = {
      {"--word-dropout 1", "--word-dropout 1 outside [0, 1)"},
      {"--sp-nbest 4 --tokenizer bpe", "--sp-nbest 4 needs --tokenizer unigram"},
      {"--ema 1", "--ema 1 outside [0, 1)"},
      {"--best-metric bleu --valid-bleu-sentences 0", "--best-metric bleu needs validation translations"},
      {"--extra-train /nonexistent/extra.tsv", "/nonexistent/extra.tsv"},
  };
  for (const auto& [flags, message] : cases) {
    const RunResult r = run_rosetta(train + flags);
    INFO(flags << "\n" << r.output);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains(message));
    CHECK_FALSE(rosetta::test::fs::exists(work / "run"));
  }
}
