// rosetta prepare-corpus: German -> English sentence pairs from the Ding dictionary, split into
// OUT/train.tsv, valid.tsv, test.tsv (and phrases.tsv with --phrases).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "commands.h"
#include "validators.h"
#include "rosetta/data/ding.h"

namespace rosetta::cli {

namespace {

struct PrepareArgs {
  std::string ding = "/usr/share/trans/de-en";
  std::string out;
  size_t valid = 1000;
  size_t test = 1000;
  bool phrases = false;
};

void run_prepare_corpus(const PrepareArgs& a) {
  const auto options =
      data::DingOptions().valid(a.valid).test(a.test).phrases(a.phrases);
  spdlog::info("reading {}", a.ding);
  const data::DingCounts c = data::prepare_ding_corpus(a.ding, a.out, options);
  for (const std::string& line : data::summary(c, options, a.out)) spdlog::info("{}", line);
}

}  // namespace

void register_prepare_corpus(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prepare-corpus", "Extract German->English sentence pairs from the Ding dictionary");
  cmd->add_option("--ding", args->ding, "Ding dictionary file (Debian package trans-de-en)")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Output directory for train/valid/test.tsv")->required();
  cmd->add_option("--valid", args->valid, "Distinct source sentences in valid.tsv")
      ->check(whole_number<size_t>())->capture_default_str();
  cmd->add_option("--test", args->test, "Distinct source sentences in test.tsv")
      ->check(whole_number<size_t>())->capture_default_str();
  cmd->add_flag("--phrases", args->phrases, "Also write phrases.tsv (dictionary phrase pairs)");
  cmd->callback([args] { run_prepare_corpus(*args); });
}

}  // namespace rosetta::cli
