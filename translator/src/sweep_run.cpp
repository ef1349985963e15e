// Running a sweep (sweep.h): the plan, one run after another through the caller's hooks, the
// records, the table and the selection.
//
// Each run is a child process (`rosetta train ...`, which SweepHooks::run starts), one at a
// time: a run has the cores to itself, and a crash in one configuration does not end the sweep.
// What the sweep learns goes to DIR/results.jsonl, one line per finished run. That file is also
// what lets a sweep resume: a configuration with a record is done; one whose run directory
// exists without a record was cut off, and `train --resume` continues it (checkpoints store the
// training time spent, so the time budget continues too).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/sweep.h"

namespace rosetta::translator {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using rosetta::detail::concat;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// A number as the shortest text that reads back the same, as fmt's "{}" (and so spdlog and the
// sweep's commands before) writes it: fixed from 1e-4 to below 1e16 ("0.0001", "1", "0.6"),
// scientific outside ("1e-05").
std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const int exp = std::stoi(sci.substr(sci.find('e') + 1));
  if (exp < -4 || exp >= 16) return sci;
  r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

struct Fd {  // a file opened for writing, closed on scope exit
  int fd;
  Fd(const std::string& path, int flags) : fd(::open(path.c_str(), flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) {
    ROSETTA_CHECK(fd >= 0, path, ": cannot open for writing: ", std::strerror(errno));
  }
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
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

bool interrupted(const SweepHooks& h) { return h.interrupted && h.interrupted(); }
void say(const std::function<void(const std::string&)>& hook, const std::string& line) {
  if (hook) hook(line);
}

// Trains one configuration (`args`: its train command) and returns its record.
SweepRecord run_one(const SweepOptions& a, const SweepHooks& h, const SweepConfig& c,
                    const std::vector<std::string>& args) {
  const std::string dir = a.out + "/runs/" + c.name, log = dir + ".out";
  const Fd out(log, O_APPEND);
  const size_t log_start = size_t(::lseek(out.fd, 0, SEEK_END));
  const std::string command = "$ " + sweep_command_line(args) + "\n";
  ROSETTA_CHECK(::write(out.fd, command.data(), command.size()) >= 0, log, ": cannot write");
  SweepRecord r;
  r.name = c.name;
  r.flags = join(c.flags);
  r.load_before = load_average();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = h.run(args, out.fd, out.fd);
  // Interrupted: no record, so that the same command continues this run from its checkpoint.
  ROSETTA_CHECK(!interrupted(h), "interrupted during run ", c.name, " (kept in ", dir,
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
json evaluate(const SweepOptions& a, const SweepHooks& h, const std::string& name) {
  const std::string dir = a.out + "/runs/" + name, test_json = dir + ".test.json", log = dir + ".out";
  const std::vector<std::string> args{"eval", "--model", dir, "--test", a.test, "--beam", std::to_string(a.beam),
                                      "--length-penalty", shortest(a.length_penalty), "--json"};
  say(h.info, "testing the selected run: " + sweep_command_line(args));
  const Fd out(test_json, O_TRUNC), err(log, O_APPEND);
  const size_t log_start = size_t(::lseek(err.fd, 0, SEEK_END));
  const int status = h.run(args, out.fd, err.fd);
  ROSETTA_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "eval of ", name, " on ", a.test,
                " failed: ", failure(log, log_start, status));
  return json::parse(read_file(test_json));
}

// Sorts the records best first, rewrites DIR/results.md and returns the table.
std::string write_table(std::vector<SweepRecord>& records, const SweepOptions& a) {
  const std::string t = sweep_table(records, a.select);
  write_file_atomic(a.out + "/results.md", t);
  return t;
}

}  // namespace

std::string sweep_command_line(const std::vector<std::string>& args) {
  std::string s = "rosetta";
  for (const auto& x : args) {
    const bool plain = !x.empty() && x.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789-_.,/=:+@%") == std::string::npos;
    s += " " + (plain ? x : "'" + std::regex_replace(x, std::regex("'"), "'\\''") + "'");
  }
  return s;
}

std::vector<SweepStep> plan_sweep(const SweepOptions& a, const SweepHooks& h) {
  const std::vector<SweepConfig> grid = read_sweep_grid(a.grid);
  for (const auto& f : a.common)
    ROSETTA_CHECK(!sweep_sets_flag(f), "the train flags after -- hold ", f, ", which the sweep sets itself");
  ROSETTA_CHECK(a.test.empty() || fs::is_regular_file(a.test), "--test ", a.test, " is not a readable file");
  const std::string results = a.out + "/results.jsonl", runs = a.out + "/runs";
  const std::vector<SweepRecord> records = read_sweep_records(results);
  for (const SweepRecord& r : records)
    ROSETTA_CHECK(r.max_time == a.max_time && r.common == a.common, results, ": run '", r.name,
                  "' was trained with another --max-time or other flags after --; a sweep compares runs under "
                  "the same budget (use another --out)");
  // Every configuration is checked before the first run starts. `args` empty: recorded, skipped.
  std::vector<SweepStep> plan;
  for (const SweepConfig& c : grid) {
    const std::string dir = runs + "/" + c.name;
    const auto r = std::find_if(records.begin(), records.end(), [&](const SweepRecord& x) { return x.name == c.name; });
    if (r != records.end()) {
      ROSETTA_CHECK(r->flags == join(c.flags), c.where, ": the flags of '", c.name, "' differ from its run ",
                    "recorded in ", results, " (", r->flags, "); choose a new name");
      plan.push_back({c, {}});
      continue;
    }
    // A run directory without a record: the sweep was stopped during this run; continue it.
    const bool resume = fs::exists(RunPaths(dir).config());
    std::vector<std::string> args{"train", resume ? "--resume" : "--out", dir, "--max-time", a.max_time};
    args.insert(args.end(), a.common.begin(), a.common.end());
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    if (h.check_train_flags) {
      try {
        h.check_train_flags(args);
      } catch (const std::exception& e) {
        ROSETTA_FAIL(c.where, ": ", e.what());
      }
    }
    plan.push_back({c, std::move(args)});
  }
  return plan;
}

std::string sweep_dry_run(const SweepOptions& a, const std::vector<SweepStep>& plan) {
  std::string out;
  for (const SweepStep& s : plan)
    out += (s.args.empty() ? "# " + s.config.name + ": recorded in " + a.out + "/results.jsonl, skipped"
                           : sweep_command_line(s.args)) +
           "\n";
  return out;
}

void run_sweep(const SweepOptions& a, const std::vector<SweepStep>& plan, const SweepHooks& h) {
  ROSETTA_CHECK(h.run != nullptr, "run_sweep: no SweepHooks::run to start the runs with");
  const std::string results = a.out + "/results.jsonl", runs = a.out + "/runs";
  std::vector<SweepRecord> records = read_sweep_records(results);
  ensure_directory(runs);  // throws when DIR cannot be created or written
  if (h.runs_begin) h.runs_begin();
  for (size_t i = 0; i < plan.size(); ++i) {
    const SweepStep& s = plan[i];
    const std::string& name = s.config.name;
    if (s.args.empty()) {
      say(h.info, concat("[", i + 1, "/", plan.size(), "] ", name, ": recorded, skipped"));
      continue;
    }
    ROSETTA_CHECK(!interrupted(h), "interrupted before run ", name, "; run the same command again to resume");
    say(h.info, concat("[", i + 1, "/", plan.size(), "] ", name, ": ", sweep_command_line(s.args), " (output in ", runs,
                       "/", name, ".out)"));
    const SweepRecord r = run_one(a, h, s.config, s.args);
    // Appended by rewriting the whole file atomically: a line is never half-written.
    write_file_atomic(results, (fs::exists(results) ? read_file(results) : "") + r.to_json() + "\n");
    records.push_back(r);
    if (r.status == "done")
      say(h.info, concat(name, ": ", sweep_cell(r.updates, 0), " updates, best valid loss ",
                         sweep_cell(r.best_valid_loss, 4), ", BLEU ", sweep_cell(r.best_valid_bleu, 2), ", chrF ",
                         sweep_cell(r.best_valid_chrf, 2)));
    else
      say(h.warn, concat(name, ": failed: ", r.error));
    write_table(records, a);  // kept current after every run
  }

  // Selection: the best finished run by --select. Only it sees the test set, once.
  say(h.print, write_table(records, a));
  const std::string select = best_metric_name(a.select);
  ROSETTA_CHECK(!records.empty() && records[0].metric(a.select), "no run finished with a validation ", select,
                " to select by (see ", a.out, "/results.md)");
  const SweepRecord& best = records[0];
  const json record = json::parse(best.to_json());
  json sel = {{"run", runs + "/" + best.name}};
  for (const char* k : {"name", "flags", "updates", "best_valid_loss", "best_valid_bleu", "best_valid_chrf",
                        "bleu_at_best_loss"})
    sel[k] = record[k];
  sel["select"] = select;
  write_file_atomic(a.out + "/selected.json", sel.dump(2) + "\n");  // kept should the evaluation fail
  say(h.print, concat("\nselected: ", best.name, " (best valid ", select, " ",
                      sweep_cell(best.best_valid(a.select), a.select == BestMetric::loss ? 4 : 2), "): ", best.flags,
                      "\n"));
  if (a.test.empty()) return;
  sel["test"] = evaluate(a, h, best.name);
  write_file_atomic(a.out + "/selected.json", sel.dump(2) + "\n");
  auto test_cell = [&](const char* k) {
    const json& v = sel["test"].value(k, json());
    return sweep_cell(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt, 2);
  };
  say(h.print, concat("test (", a.test, "): BLEU ", test_cell("bleu"), ", chrF ", test_cell("chrf"), "\n"));
}

}  // namespace rosetta::translator
