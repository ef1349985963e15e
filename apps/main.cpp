// rosetta: train a toy translator, read its logs, translate, evaluate, benchmark.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "commands.h"
#include "log.h"
#include "rosetta/core/check.h"

int main(int argc, char** argv) {
  rosetta::cli::setup_logging();
  CLI::App app{"rosetta: a small C++ deep-learning framework and toy translator"};
  app.set_version_flag("--version", std::string("rosetta ") + ROSETTA_VERSION);
  app.require_subcommand(1);
  rosetta::cli::register_train(app, argc, argv);
  rosetta::cli::register_translate(app);
  rosetta::cli::register_eval(app);
  rosetta::cli::register_plot(app);
  rosetta::cli::register_bench(app);
  rosetta::cli::register_prepare_corpus(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // One readable line; library errors name the file, line or value involved.
    std::fflush(stdout);
    std::fprintf(stderr, "rosetta: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
