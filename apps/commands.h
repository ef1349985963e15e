// The rosetta CLI's sub-commands. Each cmd_*.cpp defines one register_* function that adds its
// sub-command to the app and sets its callback. Only apps/ logs or prints (spdlog / stdout).
#pragma once

#include <CLI/CLI.hpp>

namespace rosetta::cli {

void register_prepare_corpus(CLI::App& app);
void register_prepare_messages(CLI::App& app);  // pairs from gettext catalogs
void register_train(CLI::App& app, int argc, char** argv);
void register_translate(CLI::App& app);
void register_eval(CLI::App& app);   // eval and score
void register_plot(CLI::App& app);
void register_bench(CLI::App& app);
void register_sweep(CLI::App& app);  // train a grid of configurations, select the best
void register_average(CLI::App& app);
void register_export(CLI::App& app);    // a run's model for CTranslate2
void register_report(CLI::App& app);   // an HTML page about training runs
void register_serve(CLI::App& app);    // LibreTranslate's HTTP API, batching across requests

}  // namespace rosetta::cli
