// A schedule of faults against one training run: a small model is trained for a fixed number of
// updates while a seeded schedule hits it, again and again, with what long CPU runs meet (kill -9
// at a random moment, SIGTERM, a write that fails during a checkpoint, a metrics.jsonl or
// report.html that cannot be written, a newest checkpoint corrupted on disk, one rank of an MPI
// job killed), each followed by `rosetta train --resume` and nothing else: no person acts. The
// run must then end with the weights, optimizer state, best model, metrics and validation
// translations of the same run never interrupted, bit for bit (the metrics' wall-clock fields
// apart): require_same_end.
//
// Used by tests/apps/test_fault_schedule.cpp (one process) and tests/mpi/test_mpi_faults.cpp
// (a job of two ranks under mpiexec). Every launch's output is kept in the work directory's
// logs/ while the test runs.
#pragma once

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "cli_support.h"
#include "rosetta/core/safetensors.h"

namespace rosetta::test {

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoll(v) : fallback;
}

// The copy task on a model of a few thousand parameters: a few hundred updates a second on one
// thread. Checkpoints every 6 updates (a multiple of --log-every, so that a resumed run's
// training records average the same updates), validation (and the report) every 24.
inline std::string fault_schedule_flags(int64_t steps) {
  return "--task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
         "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 400 "
         "--copy-valid-size 10 --valid-bleu-sentences 5 --threads 1 --seed 5 --log-every 3 --save-every 6 "
         "--validate-every 24 --max-steps " +
         std::to_string(steps);
}

// The last training step metrics.jsonl records (0 when none).
inline int64_t last_logged_step(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.value("kind", "") == "train") step = j.value("step", int64_t(0));
  }
  return step;
}

// The records of a JSONL file without their wall-clock fields.
inline std::vector<nlohmann::json> timeless(const std::string& path) {
  std::vector<nlohmann::json> out = read_jsonl(path);
  for (auto& j : out)
    for (const char* key : {"elapsed_s", "tokens_per_s", "allreduce_ms"}) j.erase(key);
  return out;
}

// The run in `dir` ended at `steps` as the uninterrupted run in `straight` did, bit for bit:
// every tensor of the checkpoint (weights, optimizer state, progress) and of the best model;
// every metrics record (compared first: the first that differs says where the runs parted) and
// validation translation; nothing left behind by cut writes.
inline void require_same_end(const std::string& dir, const std::string& straight, int64_t steps) {
  REQUIRE(rosetta::load_safetensors(dir + "/checkpoint.safetensors").metadata.at("train.step") ==
          std::to_string(steps));
  const auto got = timeless(dir + "/metrics.jsonl"), want = timeless(straight + "/metrics.jsonl");
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("metrics.jsonl line " << i + 1);
    REQUIRE(got[i].dump() == want[i].dump());
  }
  REQUIRE(tensors_checksum_of(dir + "/checkpoint.safetensors") ==
          tensors_checksum_of(straight + "/checkpoint.safetensors"));
  REQUIRE(tensors_checksum_of(dir + "/best.safetensors") == tensors_checksum_of(straight + "/best.safetensors"));
  REQUIRE(slurp(dir + "/translations.jsonl") == slurp(straight + "/translations.jsonl"));
  REQUIRE(fs::is_regular_file(dir + "/report.html"));
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE(e.path().string().find(".tmp.") == std::string::npos);
}

class FaultSchedule {
 public:
  // The kinds of fault drawn from, with weights by repetition.
  static std::vector<std::string> one_process_kinds() {
    return {"kill -9", "kill -9", "kill -9", "SIGTERM", "checkpoint write fails", "metrics write fails",
            "report write fails", "newest checkpoint corrupted"};
  }
  // A job of several ranks: a signal goes to one rank drawn at random. (The write limits of one
  // process are left to the schedule above: mpiexec's own shared-memory files would hit them.)
  static std::vector<std::string> job_kinds() {
    return {"kill -9 of one rank", "kill -9 of one rank", "SIGTERM to one rank", "newest checkpoint corrupted"};
  }

  // The run trains `steps` updates (fault_schedule_flags) in work/run; each launch is `launcher`
  // (such as "mpiexec -n 2", or "" for one process) followed by rosetta.
  FaultSchedule(const TempDir& work, uint64_t seed, int64_t steps, std::vector<std::string> kinds,
                std::string launcher = "")
      : dir_(work / "run"), straight_(work / "straight"), logs_(work / "logs"), flags_(fault_schedule_flags(steps)),
        steps_(steps), kinds_(std::move(kinds)), launcher_(std::move(launcher)), rng_(seed) {
    fs::create_directories(logs_);
  }

  // The whole test: the run never interrupted (in work/straight), then `faults` faults against
  // work/run, each resumed, and the two ends compared bit for bit (require_same_end). `label`
  // names the schedule in the summary it prints.
  void require_ends_as_uninterrupted(int64_t faults, const std::string& label) {
    const RunResult r = run_shell(launcher_ + " " + ROSETTA_BIN + " train " + flags_ + " --out " + straight_);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    for (int64_t i = 0; i < faults; ++i) next();
    finish();
    std::string counts;
    int64_t total = 0;
    for (const auto& [kind, n] : applied_) {
      counts += "\n  " + std::to_string(n) + " x " + kind;
      total += n;
    }
    WARN(label << ": " << total << " faults in " << launches_ << " launches, all resumed:" << counts);
    REQUIRE(total == faults);
    require_same_end(dir_, straight_, steps_);
  }

 private:
  // Applies one fault of a kind drawn from the schedule, then returns; the next fault's launch
  // is the resume after it.
  void next() {
    std::string kind = kinds_[size_t(pick(0, int(kinds_.size()) - 1))];
    // Faults on a run's files need those files (a corruption, an older checkpoint to fall back
    // on: a person would be needed otherwise, rightly); before they exist, a kill instead.
    const bool started = fs::exists(newest()) && fs::exists(dir_ + "/metrics.jsonl");
    if (started) {  // a fault that hits a finished run tests nothing: the schedule needs more steps
      INFO("the run ended before fault " << launches_ + 1);
      REQUIRE(rosetta::load_safetensors(newest()).metadata.at("train.step") != std::to_string(steps_));
    }
    const std::string kill = job() ? "kill -9 of one rank" : "kill -9";
    if (kind.find("SIGTERM") == std::string::npos && !started) kind = kill;
    if (kind == "newest checkpoint corrupted" && !fs::exists(previous())) kind = kill;
    if (kind.starts_with("kill -9")) signal_at_random(SIGKILL);
    else if (kind.starts_with("SIGTERM")) signal_at_random(SIGTERM);
    else if (kind == "checkpoint write fails") kind = write_limited(fs::file_size(newest()) / 2);
    else if (kind == "metrics write fails") kind = write_limited(fs::file_size(dir_ + "/metrics.jsonl") + 200);
    else if (kind == "report write fails") report_unwritable();
    else corrupt_newest();
    ++applied_[kind];
  }

  // The last launch: it must finish the run.
  void finish() {
    const RunResult r = launch_sync("");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }

  bool job() const { return !launcher_.empty(); }
  std::string newest() const { return dir_ + "/checkpoint.safetensors"; }
  std::string previous() const { return dir_ + "/checkpoint.prev.safetensors"; }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // What anyone would run again: the resume, or, killed before the run wrote its config.toml,
  // the first command.
  std::string command() const {
    return fs::exists(dir_ + "/config.toml") ? "train --resume " + dir_ : "train " + flags_ + " --out " + dir_;
  }
  std::string next_log() { return logs_ + "/" + std::to_string(++launches_) + ".log"; }

  RunResult launch_sync(const std::string& prefix) {
    const std::string log = next_log();
    const RunResult r = run_shell(prefix + launcher_ + " " + ROSETTA_BIN + " " + command());
    std::ofstream(log) << r.output;
    return r;
  }

  // Waits (at most a minute) for the launch to end: no launch needs a person, and a job whose
  // rank was killed must not hang.
  static int wait_at_most_a_minute(Proc& p) {
    for (int i = 0; i < 60000 && p.running(); ++i) sleep_ms(1);
    if (p.running()) {
      ::kill(p.pid, SIGKILL);
      p.wait();
      INFO(p.output());
      FAIL("still running a minute after the fault");
    }
    return p.wait();
  }

  // The signal at a random moment: while the process starts (before or while it reads its
  // checkpoint), or a few updates (0 to 12, a checkpoint every 6) after it began to train, plus
  // 0-4 ms, so that it lands anywhere in an update, a validation or a checkpoint write. In a job,
  // to one of its ranks drawn at random, once the job trains: a rank killed while mpiexec starts
  // the job can leave Open MPI 4.1's mpiexec waiting forever ("PMIX ERROR: UNREACHABLE"), which
  // no program it starts can prevent.
  void signal_at_random(int sig) {
    const int64_t from = last_logged_step(dir_);
    Proc p(command(), next_log(), launcher_);
    if (pick(0, 3) == 0 && !job()) {
      sleep_ms(pick(0, 250));
    } else {
      const int64_t target = from + pick(1, 12);
      for (int i = 0; i < 30000 && p.running() && last_logged_step(dir_) < target; ++i) sleep_ms(1);
      sleep_ms(pick(0, 4));
    }
    pid_t target = p.pid;
    if (job()) {
      std::vector<pid_t> ranks = children_of(p.pid);
      for (int i = 0; i < 5000 && p.running() && ranks.size() < 2; ++i, sleep_ms(1)) ranks = children_of(p.pid);
      if (!ranks.empty()) target = ranks[size_t(pick(0, int(ranks.size()) - 1))];
    }
    ::kill(target, sig);
    const int code = wait_at_most_a_minute(p);
    INFO(p.output() << "\n(exit status " << code << ")");
    // One process ends by the signal (128 + it, before it set its handler) or stops itself on
    // SIGTERM (0). A job's ranks stop together on SIGTERM (0); when one was killed, mpiexec ends
    // the others (non-zero).
    if (job()) REQUIRE((code == 0 || sig == SIGKILL));
    else REQUIRE((code == 0 || code == 128 + sig));
  }

  // A file size limit (RLIMIT_FSIZE; SIGXFSZ ignored, so that the write fails with EFBIG): the
  // run stops at the first write past it with an error naming the file, and keeps its last
  // checkpoint. Returns which write failed: the checkpoint's or the metrics' (whichever came
  // first; train.log's appends fail too, which only the log notices).
  std::string write_limited(uintmax_t bytes) {
    const RunResult r = launch_sync("trap '' XFSZ; prlimit --fsize=" + std::to_string(bytes) + " ");
    INFO(r.output);
    if (r.exit_code == 0) return "write limit, run ended first";
    REQUIRE(r.exit_code == 1);
    const size_t error = r.output.find("rosetta: error:");
    REQUIRE(error != std::string::npos);
    const std::string line = r.output.substr(error, r.output.find('\n', error) - error);
    if (line.find("metrics.jsonl: write failed") != std::string::npos) return "metrics write fails";
    REQUIRE(line.find("File too large") != std::string::npos);
    REQUIRE(line.find("checkpoint") != std::string::npos);
    return "checkpoint write fails";
  }

  // report.html is a directory for one launch: each validation's report fails with a warning,
  // training goes on. Stopped by a kill after a validation.
  void report_unwritable() {
    const std::string report = dir_ + "/report.html";
    fs::remove_all(report);
    fs::create_directories(report + "/blocked");
    const int64_t from = last_logged_step(dir_);
    Proc p(command(), next_log(), launcher_);
    for (int i = 0; i < 30000 && p.running() && last_logged_step(dir_) < from + 30; ++i) sleep_ms(1);
    ::kill(p.pid, SIGKILL);
    const int code = wait_at_most_a_minute(p);
    INFO(p.output());
    REQUIRE((code == 0 || code == 128 + SIGKILL));
    if (p.output().find("valid step") != std::string::npos)
      REQUIRE(p.output().find("could not update " + report) != std::string::npos);
    fs::remove_all(report);
  }

  // One byte of the newest checkpoint's tensors flipped in place, as a failing disk would.
  void corrupt_newest() {
    std::fstream f(newest(), std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekg(-int(pick(1, 4096)), std::ios::end);
    const auto at = f.tellg();
    char c = 0;
    f.read(&c, 1);
    f.seekp(at);
    c = char(c ^ (1 << pick(0, 7)));
    f.write(&c, 1);
  }

  std::string dir_, straight_, logs_, flags_;
  int64_t steps_;
  std::vector<std::string> kinds_;
  std::string launcher_;
  std::mt19937_64 rng_;
  std::map<std::string, int> applied_;
  int launches_ = 0;
};

}  // namespace rosetta::test
