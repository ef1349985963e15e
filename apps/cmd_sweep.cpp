// rosetta sweep: train a list of configurations one after another under the same budget, write
// a table, and select the best by validation. It is how the default translator's recipe is chosen.
//
// Each run is a child process of this very binary (`rosetta train ...`), one at a time: a run
// has the cores to itself, and a crash in one configuration does not end the sweep. What the
// sweep learns goes to DIR/results.jsonl, one line per finished run. That file is also what
// lets a sweep resume: a configuration with a record is done; one whose run directory exists
// without a record was cut off, and `train --resume` continues it (checkpoints store the
// training time spent, so the time budget continues too).
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "train_config.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct SweepArgs {
  std::string grid, out, max_time = "13m", select = "bleu", test;
  int beam = 4;
  double length_penalty = 1.0;
  bool dry_run = false;
  std::vector<std::string> common;  // train flags for every run (after --)
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// For showing a command: tokens with characters a shell would interpret are single-quoted.
std::string shell_words(const std::vector<std::string>& v) {
  std::string s = "rosetta";
  for (const auto& x : v) {
    const bool plain = !x.empty() && x.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789-_.,/=:+@%") == std::string::npos;
    s += " " + (plain ? x : "'" + std::regex_replace(x, std::regex("'"), "'\\''") + "'");
  }
  return s;
}

// Parses a run's flags as `rosetta train` will (unknown flags, malformed and invalid values), so
// that a typo in the last line fails the sweep before the first run rather than hours later.
void check_train_flags(const std::vector<std::string>& args, const std::string& where) {
  TrainConfig c;
  CLI::App app;
  std::string config_file;
  app.add_option("--config", config_file);
  add_train_options(app, c);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // CLI11 parses from the back; no "train"
    app.parse(reversed);
    if (!config_file.empty()) apply_config_file(app, config_file);
    c.validate();
  } catch (const std::exception& e) {
    ROSETTA_FAIL(where, ": ", e.what());
  }
}

// ------------------------------------------------------------------ child processes

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

struct Fd {  // a file descriptor closed on scope exit
  int fd;
  Fd(const std::string& path, int flags) : fd(::open(path.c_str(), flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) {
    ROSETTA_CHECK(fd >= 0, path, ": cannot open for writing: ", std::strerror(errno));
  }
  ~Fd() { ::close(fd); }
};

// Why a child failed: its "rosetta: error: ..." line, else the last line it wrote (`log`, from
// byte `from`), else how it ended.
std::string failure(const std::string& log, size_t from, int status) {
  std::string text = fs::exists(log) ? read_file(log) : "", line;
  text = text.substr(std::min(from, text.size()));
  std::string last;
  for (std::istringstream in(text); std::getline(in, line);)
    if (!line.empty()) last = line;
  if (const size_t at = text.rfind("rosetta: error: "); at != std::string::npos)
    last = text.substr(at + 16, text.find('\n', at) - at - 16);
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return last.empty() ? "exit status " + std::to_string(WEXITSTATUS(status)) : last;
}

// The 1-minute load average: a run under a time budget measures nothing if it shared the cores.
std::optional<double> load_average() {
  std::istringstream in(fs::exists("/proc/loadavg") ? read_file("/proc/loadavg") : "");
  double v;
  return in >> v ? std::optional<double>(v) : std::nullopt;
}

// ------------------------------------------------------------------ the sweep

// Trains one configuration (`args`: its train command) and returns its record.
SweepRecord run_one(const SweepArgs& a, const SweepConfig& c, const std::vector<std::string>& args) {
  const std::string dir = a.out + "/runs/" + c.name, log = dir + ".out";
  const Fd out(log, O_APPEND);
  const size_t log_start = size_t(::lseek(out.fd, 0, SEEK_END));
  const std::string command = "$ " + shell_words(args) + "\n";
  ROSETTA_CHECK(::write(out.fd, command.data(), command.size()) >= 0, log, ": cannot write");
  SweepRecord r;
  r.name = c.name;
  r.flags = join(c.flags);
  r.load_before = load_average();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = run_child(args, out.fd, out.fd);
  // Interrupted: no record, so that the same command continues this run from its checkpoint.
  ROSETTA_CHECK(!g_signal, "interrupted during run ", c.name, " (kept in ", dir,
                "); run the same rosetta sweep command again to resume");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.load_after = load_average();
  r.status = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "done" : "failed";
  if (r.status == "failed") r.error = failure(log, log_start, status);
  r.summarize(RunPaths(dir).metrics());
  r.max_time = a.max_time;
  r.common = a.common;
  return r;
}

// `rosetta eval --json` of the selected run on --test; its output also in DIR/runs/NAME.test.json.
json evaluate(const SweepArgs& a, const std::string& name) {
  const std::string dir = a.out + "/runs/" + name, test_json = dir + ".test.json", log = dir + ".out";
  const std::vector<std::string> args{"eval", "--model", dir, "--test", a.test, "--beam", std::to_string(a.beam),
                                      "--length-penalty", fmt::format("{}", a.length_penalty), "--json"};
  spdlog::info("testing the selected run: {}", shell_words(args));
  const Fd out(test_json, O_TRUNC), err(log, O_APPEND);
  const size_t log_start = size_t(::lseek(err.fd, 0, SEEK_END));
  const int status = run_child(args, out.fd, err.fd);
  ROSETTA_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "eval of ", name, " on ", a.test,
                " failed: ", failure(log, log_start, status));
  return json::parse(read_file(test_json));
}

// Sorts the records best first, rewrites DIR/results.md and returns the table.
std::string write_table(std::vector<SweepRecord>& records, const SweepArgs& a) {
  const std::string t = sweep_table(records, a.select);
  write_file_atomic(a.out + "/results.md", t);
  return t;
}

void run_sweep(const SweepArgs& a) {
  const std::vector<SweepConfig> grid = read_sweep_grid(a.grid);
  for (const auto& f : a.common)
    ROSETTA_CHECK(!sweep_sets_flag(f), "the train flags after -- hold ", f, ", which the sweep sets itself");
  ROSETTA_CHECK(a.test.empty() || fs::is_regular_file(a.test), "--test ", a.test, " is not a readable file");
  const std::string results = a.out + "/results.jsonl", runs = a.out + "/runs";
  std::vector<SweepRecord> records = read_sweep_records(results);
  for (const SweepRecord& r : records)
    ROSETTA_CHECK(r.max_time == a.max_time && r.common == a.common, results, ": run '", r.name,
                  "' was trained with another --max-time or other flags after --; a sweep compares runs under "
                  "the same budget (use another --out)");

  // Every configuration is checked before the first run starts. `args` empty: recorded, skipped.
  std::vector<std::pair<const SweepConfig*, std::vector<std::string>>> plan;
  for (const SweepConfig& c : grid) {
    const std::string dir = runs + "/" + c.name;
    const auto r = std::find_if(records.begin(), records.end(), [&](const SweepRecord& x) { return x.name == c.name; });
    if (r != records.end()) {
      ROSETTA_CHECK(r->flags == join(c.flags), c.where, ": the flags of '", c.name, "' differ from its run ",
                    "recorded in ", results, " (", r->flags, "); choose a new name");
      plan.push_back({&c, {}});
      continue;
    }
    // A run directory without a record: the sweep was stopped during this run; continue it.
    const bool resume = fs::exists(RunPaths(dir).config());
    std::vector<std::string> args{"train", resume ? "--resume" : "--out", dir, "--max-time", a.max_time};
    args.insert(args.end(), a.common.begin(), a.common.end());
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    check_train_flags(args, c.where);
    plan.push_back({&c, std::move(args)});
  }
  if (a.dry_run) {
    for (const auto& [c, args] : plan)
      std::cout << (args.empty() ? "# " + c->name + ": recorded in " + results + ", skipped" : shell_words(args))
                << "\n";
    return;
  }

  ensure_directory(runs);  // throws when DIR cannot be created or written
  struct sigaction sa {};
  sa.sa_handler = forward_signal;  // no SA_RESTART: waitpid returns to see the signal
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& [c, args] = plan[i];
    if (args.empty()) {
      spdlog::info("[{}/{}] {}: recorded, skipped", i + 1, plan.size(), c->name);
      continue;
    }
    ROSETTA_CHECK(!g_signal, "interrupted before run ", c->name, "; run the same command again to resume");
    spdlog::info("[{}/{}] {}: {} (output in {}/{}.out)", i + 1, plan.size(), c->name, shell_words(args), runs,
                 c->name);
    const SweepRecord r = run_one(a, *c, args);
    // Appended by rewriting the whole file atomically: a line is never half-written.
    write_file_atomic(results, (fs::exists(results) ? read_file(results) : "") + r.to_json() + "\n");
    records.push_back(r);
    if (r.status == "done")
      spdlog::info("{}: {} updates, best valid loss {}, BLEU {}, chrF {}", c->name, sweep_cell(r.updates, 0),
                   sweep_cell(r.best_valid_loss, 4), sweep_cell(r.best_valid_bleu, 2),
                   sweep_cell(r.best_valid_chrf, 2));
    else
      spdlog::warn("{}: failed: {}", c->name, r.error);
    write_table(records, a);  // kept current after every run
  }

  // Selection: the best finished run by --select. Only it sees the test set, once.
  std::cout << write_table(records, a);
  ROSETTA_CHECK(!records.empty() && records[0].metric(a.select), "no run finished with a validation ", a.select,
                " to select by (see ", a.out, "/results.md)");
  const SweepRecord& best = records[0];
  const json record = json::parse(best.to_json());
  json sel = {{"run", runs + "/" + best.name}};
  for (const char* k : {"name", "flags", "updates", "best_valid_loss", "best_valid_bleu", "best_valid_chrf",
                        "bleu_at_best_loss"})
    sel[k] = record[k];
  sel["select"] = a.select;
  write_file_atomic(a.out + "/selected.json", sel.dump(2) + "\n");  // kept should the evaluation fail
  std::cout << "\nselected: " << best.name << " (best valid " << a.select << " "
            << sweep_cell(best.best_valid(a.select), a.select == "loss" ? 4 : 2) << "): " << best.flags << "\n";
  if (a.test.empty()) return;
  sel["test"] = evaluate(a, best.name);
  write_file_atomic(a.out + "/selected.json", sel.dump(2) + "\n");
  auto test_cell = [&](const char* k) {
    const json& v = sel["test"].value(k, json());
    return sweep_cell(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt, 2);
  };
  std::cout << "test (" << a.test << "): BLEU " << test_cell("bleu") << ", chrF " << test_cell("chrf") << "\n";
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "train a grid of configurations one after another under the same "
                                              "budget; select the best by validation");
  cmd->add_option("--grid", a->grid, "text file: one configuration per line, NAME TRAIN-FLAGS...")->required();
  cmd->add_option("--out", a->out, "sweep directory (runs/, results.jsonl, results.md, selected.json)")->required();
  cmd->add_option("--max-time", a->max_time, "time budget of every run (train --max-time; 0: none)")
      ->capture_default_str();
  cmd->add_option("--select", a->select, "select by best validation bleu, chrf (highest) or loss (lowest)")
      ->check(CLI::IsMember({"bleu", "chrf", "loss"}))->capture_default_str();
  cmd->add_option("--test", a->test, "test set (TSV) to evaluate the selected run on, and only it");
  cmd->add_option("--beam", a->beam, "beam size for --test")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--length-penalty", a->length_penalty, "length penalty for --test")
      ->check(finite_range(0.0, 10.0))->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "print the commands the sweep would run, and exit");
  cmd->add_option("train-flags", a->common, "after --: rosetta train flags for every run (data, model...)");
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
  cmd->callback([a, cmd] {
    for (const std::string& extra : cmd->remaining())  // CLI11 lists the "--" there too
      if (extra != "--") throw CLI::ValidationError("unexpected " + extra + ": rosetta train flags go after --");
    run_sweep(*a);
  });
}

}  // namespace rosetta::cli
