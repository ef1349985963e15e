// rosetta prepare-messages: German -> English pairs from gettext catalogs (.mo files), split by
// English msgid into OUT/train.tsv, valid.tsv, test.tsv (rosetta/data/messages.h).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "validators.h"
#include "rosetta/data/messages.h"

namespace rosetta::cli {

namespace {

struct PrepareMessagesArgs {
  std::vector<std::string> mo;
  std::string out;
  size_t valid = 1000;
  size_t test = 1000;
  size_t min_chars = 2;
  size_t max_chars = 200;
};

void run_prepare_messages(const PrepareMessagesArgs& a) {
  const auto options = data::MessagesOptions()
                           .valid(a.valid)
                           .test(a.test)
                           .min_chars(a.min_chars)
                           .max_chars(a.max_chars);
  const std::vector<std::filesystem::path> inputs(a.mo.begin(), a.mo.end());
  const data::MessagesCounts c = data::prepare_messages_corpus(inputs, a.out, options);
  for (const auto& [name, pairs] : c.catalog_pairs) spdlog::info("{}: {} pairs", name, pairs);
  for (const auto& [name, reason] : c.skipped) spdlog::warn("skipped {}: {}", name, reason);
  for (const std::string& line : data::summary(c, options, a.out)) spdlog::info("{}", line);
}

}  // namespace

void register_prepare_messages(CLI::App& app) {
  auto args = std::make_shared<PrepareMessagesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prepare-messages",
      "Extract German->English pairs from gettext catalogs (.mo files; scripts/prepare-messages.sh)");
  cmd->add_option("--mo", args->mo,
                  "Catalogs: .mo files, or directories whose *.mo files are read "
                  "(e.g. usr/share/locale/de/LC_MESSAGES)")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--out", args->out, "Output directory for train/valid/test.tsv")->required();
  cmd->add_option("--valid", args->valid, "Distinct English msgids in valid.tsv")
      ->check(whole_number<size_t>())->capture_default_str();
  cmd->add_option("--test", args->test, "Distinct English msgids in test.tsv")
      ->check(whole_number<size_t>())->capture_default_str();
  cmd->add_option("--min-chars", args->min_chars, "Drop pairs with a side shorter than this")
      ->capture_default_str()
      ->check(whole_number<size_t>())
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  cmd->add_option("--max-chars", args->max_chars, "Drop pairs with a side longer than this")
      ->capture_default_str()
      ->check(whole_number<size_t>())
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  cmd->callback([args] { run_prepare_messages(*args); });
}

}  // namespace rosetta::cli
