// rosetta sweep: train a list of configurations one after another under the same budget, write
// a table, and select the best by validation (translator/sweep.h). It is how the default
// translator's recipe is chosen. Here: the flags, and the runs as child processes of this very
// binary with Ctrl-C passed on to them.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/core/check.h"
#include "train_config.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

// Parses a run's flags as `rosetta train` will (unknown flags, malformed and invalid values).
void check_train_flags(const std::vector<std::string>& args) {
  TrainConfig c;
  CLI::App app;
  std::string config_file;
  app.add_option("--config", config_file);
  add_train_options(app, c);
  std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // CLI11 parses from the back; no "train"
  app.parse(reversed);
  if (!config_file.empty()) apply_config_file(app, config_file);
  c.validate();
}

std::atomic<pid_t> g_child{0};
volatile std::sig_atomic_t g_signal = 0;

// The running child has its own process group, so Ctrl-C at the terminal reaches the sweep
// alone, which passes each signal on once: one makes the run save a checkpoint and stop, as
// `rosetta train` does, and a second stops it at once.
extern "C" void forward_signal(int sig) {
  g_signal = sig;
  if (const pid_t child = g_child.load(); child > 0) ::kill(child, sig);
}

// Runs `rosetta ARGS...` (this binary: /proc/self/exe, no shell, so no quoting) with stdin
// /dev/null, stdout on `out_fd` and stderr on `err_fd`; returns its wait status. Should the
// sweep die, the kernel sends the child SIGTERM (PR_SET_PDEATHSIG): no run trains on unseen.
int run_child(const std::vector<std::string>& args, int out_fd, int err_fd) {
  std::vector<char*> argv{const_cast<char*>("rosetta")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  ROSETTA_CHECK(pid >= 0, "cannot start rosetta ", args[0], ": ", std::strerror(errno));
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the sweep died before prctl
    const int in = ::open("/dev/null", O_RDONLY);
    if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(127);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  g_child = pid;
  if (g_signal) ::kill(pid, g_signal);  // a signal that came before g_child was set
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return status;
}

void sweep(const SweepOptions& o, bool dry_run) {
  SweepHooks hooks;
  hooks.run = run_child;
  hooks.check_train_flags = check_train_flags;
  hooks.runs_begin = [] {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;  // no SA_RESTART: waitpid returns to see the signal
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  };
  hooks.interrupted = [] { return g_signal != 0; };
  hooks.info = [](const std::string& line) { spdlog::info("{}", line); };
  hooks.warn = [](const std::string& line) { spdlog::warn("{}", line); };
  hooks.print = [](const std::string& text) { std::cout << text; };
  const std::vector<SweepStep> plan = plan_sweep(o, hooks);
  if (dry_run) std::cout << sweep_dry_run(o, plan);
  else run_sweep(o, plan, hooks);
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto dry_run = std::make_shared<bool>(false);
  auto select = std::make_shared<std::string>(best_metric_name(o->select));
  CLI::App* cmd = app.add_subcommand("sweep", "train a grid of configurations one after another under the same "
                                              "budget; select the best by validation");
  cmd->add_option("--grid", o->grid, "text file: one configuration per line, NAME TRAIN-FLAGS...")->required();
  cmd->add_option("--out", o->out, "sweep directory (runs/, results.jsonl, results.md, selected.json)")->required();
  cmd->add_option("--max-time", o->max_time, "time budget of every run (train --max-time; 0: none)")
      ->capture_default_str();
  cmd->add_option("--select", *select, "select by best validation bleu, chrf (highest) or loss (lowest)")
      ->check(CLI::IsMember({"bleu", "chrf", "loss"}))->capture_default_str();
  cmd->add_option("--test", o->test, "test set (TSV) to evaluate the selected run on, and only it");
  cmd->add_option("--beam", o->beam, "beam size for --test")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--length-penalty", o->length_penalty, "length penalty for --test")
      ->check(finite_range(0.0, 10.0))->capture_default_str();
  cmd->add_flag("--dry-run", *dry_run, "print the commands the sweep would run, and exit");
  cmd->add_option("train-flags", o->common, "after --: rosetta train flags for every run (data, model...)");
  cmd->footer(R"(The grid: one configuration per line, NAME then rosetta train flags split on whitespace;
blank lines and lines starting with # are skipped. NAME: letters, digits, '.', '_', '-'.
  ls02-drop03  --label-smoothing 0.2 --dropout 0.3
  lr1e-3       --lr 1e-3
The runs go one after another, each rosetta train --out DIR/runs/NAME --max-time T TRAIN-FLAGS
FLAGS (a flag goes after -- or in the lines, not both), its output in DIR/runs/NAME.out. A run
that fails is recorded as failed and the sweep goes on (to run it again, delete its line in
results.jsonl and its run directory).
After each run: a line in DIR/results.jsonl (updates, epochs, best valid loss/BLEU/chrF, BLEU
at the best loss, train and wall seconds, load average before/after) and DIR/results.md, a
table of all recorded runs sorted by --select. "BLEU at best loss" is the validation BLEU of
best.safetensors, the checkpoint that eval and translate load. At the end DIR/selected.json
names the best finished run; with --test, it alone is evaluated (DIR/runs/NAME.test.json).
Resume: the same command again skips the recorded configurations and continues (train
--resume) a run that was cut off. A recorded NAME whose flags changed is an error: choose a
new name. Ctrl-C stops the current run at a checkpoint, without a record.
Example:
  rosetta sweep --grid grid.txt --out sweeps/ls --max-time 13m --test data/de-en/test.tsv \
    -- --train data/de-en/train.tsv --valid data/de-en/valid.tsv)");
  cmd->allow_extras();  // to say where train flags go, below
  cmd->callback([o, select, dry_run, cmd] {
    for (const std::string& extra : cmd->remaining())  // CLI11 lists the "--" there too
      if (extra != "--") throw CLI::ValidationError("unexpected " + extra + ": rosetta train flags go after --");
    o->select = parse_best_metric(*select);
    sweep(*o, *dry_run);
  });
}

}  // namespace rosetta::cli
