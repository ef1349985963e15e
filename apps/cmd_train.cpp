// rosetta train: train a translator (or the copy task), resumable.
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include "commands.h"
#include "log.h"
#include "rosetta/report/report.h"
#include "rosetta/core/check.h"
#include "rosetta/translator/recipe.h"
#include "rosetta/translator/run.h"
#include "train_config.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int sig) {
  if (g_stop.exchange(true)) {  // a second signal stops at once
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

// The value of `flag` on the command line itself ("" when not there), read before the parse.
std::string argv_value(int argc, char** argv, const std::string& flag) {
  std::string value;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag && i + 1 < argc) value = argv[i + 1];
    else if (a.rfind(flag + "=", 0) == 0) value = a.substr(flag.size() + 1);
  }
  return value;
}

// `--resume DIR` reads DIR/config.toml unless --config is given: flags on the command line
// still override it (e.g. a larger --max-steps to train longer).
std::string resume_dir(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" || a.rfind("--config=", 0) == 0) return "";
  }
  return argv_value(argc, argv, "--resume");
}

// Says what is wrong with `--resume DIR` before its config.toml is read.
void check_resume_dir(const std::string& dir) {
  ROSETTA_CHECK(std::filesystem::is_directory(dir), "--resume ", dir, " is not a directory (give a run directory ",
                "made by rosetta train --out)");
  ROSETTA_CHECK(std::filesystem::is_regular_file(RunPaths(dir).config()), "--resume ", dir,
                " holds no config.toml: not a run directory made by rosetta train (or give --config FILE)");
}

// Trains as configured, logging to stderr and, once it exists, the run's train.log; on a
// terminal the training lines are a progress line redrawn in place.
TrainOutcome train_logged(const TrainConfig& c, const std::string& toml, const std::string& recipe_line) {
  setup_logging();  // on stderr until the run directory exists
  auto bar = std::make_shared<ProgressLine>();
  RunHooks hooks;
  hooks.info = [bar](const std::string& line) {
    bar->clear();
    spdlog::info("{}", line);
  };
  hooks.warn = [bar](const std::string& line) {
    bar->clear();
    spdlog::warn("{}", line);
  };
  if (stderr_is_tty()) hooks.progress = [bar](const std::string& line) { bar->show(line); };
  hooks.run_dir_ready = [recipe_line](const RunPaths& run) {
    setup_logging(run.log());
    if (!recipe_line.empty()) spdlog::info("{}", recipe_line);
  };
  hooks.validated = [](const RunPaths& run, int64_t step, const TranslationScores& v) {
    try {  // the report follows the run; it never stops training
      for (const std::string& w : record_validation(run.dir, step, v.src, v.ref, v.hyp)) spdlog::warn("{}", w);
    } catch (const std::exception& e) {
      spdlog::warn("could not update {}: {}", run.report(), e.what());
    }
  };
  const TrainOutcome r = train_translator(c, toml, hooks, &g_stop);
  bar->clear();
  return r;
}

// --recipe (translator/recipe.h): sets the options given neither on the command line nor in
// --config; returns the line for the log (empty for --recipe none). A run with a budget and no
// model or regularization option given takes --recipe auto unless told --recipe none
// (translator::recipe_by_default).
std::string apply_recipe(CLI::App& cmd, TrainConfig& config) {
  std::set<std::string> given;  // on the command line or in --config
  for (const CLI::Option* opt : cmd.get_options())
    if (opt->count() > 0 && !opt->get_lnames().empty()) given.insert(opt->get_lnames().front());
  const bool by_default = translator::recipe_by_default(config, given);
  if (by_default) config.recipe = RecipeChoice::automatic;
  if (config.recipe == RecipeChoice::none) return "";
  const translator::Recipe r = translator::choose_recipe(config, given);
  std::string toml = by_default ? "recipe=\"auto\"\n" : "", set, kept;
  for (const auto& [key, value] : r.settings) {
    const CLI::Option* opt = cmd.get_option("--" + key);
    const bool given = opt->count() > 0;
    std::string& list = given ? kept : set;
    list += (list.empty() ? "" : ", ") + key + " " + (given ? opt->as<std::string>() : value);
    if (!given) toml += key + "=" + value + "\n";
  }
  apply_config_toml(cmd, toml, std::string("--recipe ") + recipe_choice_name(config.recipe));
  return r.reason + "; sets " + (set.empty() ? "nothing" : set) + (kept.empty() ? "" : "; as given: " + kept) +
         (by_default ? " (auto: the default with a budget; --recipe none keeps the plain defaults)" : "");
}

}  // namespace

void register_train(CLI::App& app, int argc, char** argv) {
  auto config = std::make_shared<TrainConfig>();
  auto dump = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("train", "train a translator (or --task copy) into --out DIR");
  // --out as given here (config.toml's `out` is where the run was made, not a request).
  const std::string resume = resume_dir(argc, argv), out = argv_value(argc, argv, "--out");
  auto config_file = std::make_shared<std::string>(resume.empty() ? "" : RunPaths(resume).config());
  auto resume_config = std::make_shared<bool>(!resume.empty());
  cmd->add_option("--config", *config_file, "read options from a TOML file (flags given here override it)")
      ->configurable(false);
  cmd->add_flag("--dump-config", *dump, "print the effective configuration as TOML and exit")
      ->configurable(false);
  cmd->option_defaults()->always_capture_default();
  add_train_options(*cmd, *config);
  cmd->callback([cmd, config, dump, config_file, resume_config, out] {
    if (*resume_config) check_resume_dir(config->resume);
    std::error_code ec;
    ROSETTA_CHECK(config->resume.empty() || out.empty() || std::filesystem::equivalent(out, config->resume, ec),
                  "--out ", out, " with --resume ", config->resume,
                  ": a resumed run continues in its own directory (drop --out, or copy the run there and resume that)");
    if (!config_file->empty()) apply_config_file(*cmd, *config_file);
    // A resumed run's config.toml holds every option: its recipe has nothing left to set.
    const std::string recipe_line = config->resume.empty() ? apply_recipe(*cmd, *config) : "";
    if (*dump) {
      if (!recipe_line.empty()) std::cout << "# " << recipe_line << "\n";
      std::cout << cmd->config_to_str(true, true);
      return;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    TrainConfig c = *config;
    if (!c.resume.empty()) c.out = c.resume;
    // The effective configuration, with the run directory filled in.
    std::string toml = cmd->config_to_str(true, false);
    const TrainOutcome r = train_logged(c, toml, recipe_line);
    if (r.stop_reason == StopReason::interrupted && r.root)
      spdlog::info("interrupted at step {}; resume with: rosetta train --resume {}", r.steps, c.out);
  });
}

}  // namespace rosetta::cli
