// rosetta: train a toy translator, read its logs, translate, evaluate, benchmark.
//
// Exit status: 0 on success, 1 for any error while running a command, 2 for a command-line
// usage error. Either way the user sees one line on stderr: "rosetta: error: <message>".
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "errors.h"
#include "fatal_signals.h"
#include "log.h"
#include "rosetta/core/check.h"
#include "rosetta/core/start.h"
#include "rosetta_commit.h"  // ROSETTA_COMMIT, generated at build time (cmake/commit.cmake)
#include "text_io.h"

namespace {

using rosetta::cli::print_error;

// The name of the first argument when it looks like a command that does not exist.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->check_name(argv[1])) return "";
  return argv[1];
}

}  // namespace

int main(int argc, char** argv) {
  // Passive waiting, OpenBLAS's best core, rosetta's kernels checked on this CPU
  // (rosetta/core/start.h): may start the program again.
  for (const std::string& w : rosetta::start(argc, argv).warnings())
    std::fprintf(stderr, "rosetta: warning: %s\n", w.c_str());
  rosetta::cli::report_fatal_signals();  // a crash names its kernel (fatal_signals.h)
  rosetta::cli::report_escaped_exceptions();
  rosetta::cli::setup_logging();
  CLI::App app{"rosetta: a small C++ deep-learning framework and toy translator"};
  // "rosetta 0.2.1 (commit 1a2b3c4)": -dirty where the tree had changes, "unknown" outside git.
  app.set_version_flag("--version", std::string("rosetta ") + ROSETTA_VERSION + " (commit " + ROSETTA_COMMIT + ")");
  app.require_subcommand(1);
  rosetta::cli::register_train(app, argc, argv);
  rosetta::cli::register_translate(app);
  rosetta::cli::register_serve(app);
  rosetta::cli::register_eval(app);
  rosetta::cli::register_plot(app);
  rosetta::cli::register_bench(app);
  rosetta::cli::register_sweep(app);
  rosetta::cli::register_average(app);
  rosetta::cli::register_export(app);
  rosetta::cli::register_report(app);
  rosetta::cli::register_prepare_corpus(app);
  rosetta::cli::register_prepare_messages(app);
  if (const std::string cmd = unknown_command(app, argc, argv); !cmd.empty()) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    print_error("unknown command '" + cmd + "' (commands: " + names + "; see rosetta --help)");
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "rosetta";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    print_error(std::string(e.what()) + " (see " + where + " --help)");
    return 2;
  } catch (const std::exception& e) {
    // Library errors name the file, line or value involved.
    print_error(rosetta::cli::error_message(e));
    return 1;
  }
  try {
    rosetta::cli::check_stdout();  // what any command printed (a report, scores, a config)
  } catch (const std::exception& e) {
    print_error(rosetta::cli::error_message(e));
    return 1;
  }
  return 0;
}
