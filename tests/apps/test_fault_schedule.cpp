// A schedule of faults against one training run: a small model is trained for a fixed number of
// updates while a seeded schedule hits it, again and again, with what long CPU runs meet (kill -9
// at a random moment, SIGTERM, a write that fails during a checkpoint, a metrics.jsonl or
// report.html that cannot be written, a newest checkpoint corrupted on disk), each followed by
// `rosetta train --resume` and nothing else: no person acts. The run then ends with the weights,
// optimizer state, best model, metrics and validation translations of the same run never
// interrupted, bit for bit (the metrics' wall-clock fields apart).
//
// CI runs 50 faults (seed 1). A longer schedule is one command:
//   ROSETTA_FAULTS=500 ROSETTA_FAULT_SEED=7 build/tests/test_apps "a schedule of faults*"
// Every launch's output is kept in the test's directory (logs/) while it runs.
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "cli_support.h"
#include "rosetta/core/safetensors.h"

namespace {

using rosetta::test::Proc;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::read_jsonl;
using rosetta::test::run_rosetta;
using rosetta::test::run_shell;
using rosetta::test::sleep_ms;
using rosetta::test::slurp;
namespace fs = std::filesystem;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoll(v) : fallback;
}

const int64_t kFaults = env_int("ROSETTA_FAULTS", 50);
// Enough updates that the run is still training when the last fault hits (a fault costs at most
// about a dozen updates of progress).
const int64_t kSteps = std::max<int64_t>(600, 12 * kFaults);
// The copy task on a model of a few thousand parameters: a few hundred updates a second on one
// thread. Checkpoints every 6 updates (a multiple of --log-every, so that a resumed run's
// training records average the same updates), validation (and the report) every 24.
const std::string kFlags =
    "--task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
    "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 400 "
    "--copy-valid-size 10 --valid-bleu-sentences 5 --threads 1 --seed 5 --log-every 3 --save-every 6 "
    "--validate-every 24 --max-steps " + std::to_string(kSteps);

// The last training step metrics.jsonl records (0 when none).
int64_t last_logged_step(const std::string& dir) {
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
std::vector<nlohmann::json> timeless(const std::string& path) {
  std::vector<nlohmann::json> out = read_jsonl(path);
  for (auto& j : out)
    for (const char* key : {"elapsed_s", "tokens_per_s", "allreduce_ms"}) j.erase(key);
  return out;
}

std::string tensors_checksum_of(const std::string& path) {
  return rosetta::load_safetensors(path).metadata.at("rosetta.checksum");
}

class Schedule {
 public:
  Schedule(const TempDir& work, uint64_t seed) : dir_(work / "run"), logs_(work / "logs"), rng_(seed) {
    fs::create_directories(logs_);
  }

  // Applies one fault of a kind drawn from the schedule, then returns; the next fault's launch
  // is the resume after it.
  void next() {
    const char* kinds[] = {"kill -9", "kill -9", "kill -9", "SIGTERM", "checkpoint write fails",
                           "metrics write fails", "report write fails", "newest checkpoint corrupted"};
    std::string kind = kinds[pick(0, 7)];
    // Faults on a run's files need those files (a corruption, an older checkpoint to fall back
    // on: a person would be needed otherwise, rightly); before they exist, a kill instead.
    const bool started = fs::exists(newest()) && fs::exists(dir_ + "/metrics.jsonl");
    if (started) {  // a fault that hits a finished run tests nothing: the schedule needs more steps
      INFO("the run ended before fault " << launches_ + 1);
      REQUIRE(rosetta::load_safetensors(newest()).metadata.at("train.step") != std::to_string(kSteps));
    }
    if (kind != "SIGTERM" && !started) kind = "kill -9";
    if (kind == "newest checkpoint corrupted" && !fs::exists(previous())) kind = "kill -9";
    if (kind == "kill -9" || kind == "SIGTERM") signal_at_random(kind == "kill -9" ? SIGKILL : SIGTERM);
    else if (kind == "checkpoint write fails") kind = write_limited(fs::file_size(newest()) / 2);
    else if (kind == "metrics write fails") kind = write_limited(fs::file_size(dir_ + "/metrics.jsonl") + 200);
    else if (kind == "report write fails") report_unwritable();
    else corrupt_newest();
    ++applied_[kind];
  }

  // The last launch: it must finish the run.
  void finish() {
    const RunResult r = launch_sync("");
    REQUIRE(r.exit_code == 0);
  }

  const std::string& dir() const { return dir_; }
  const std::map<std::string, int>& applied() const { return applied_; }
  int launches() const { return launches_; }

 private:
  std::string newest() const { return dir_ + "/checkpoint.safetensors"; }
  std::string previous() const { return dir_ + "/checkpoint.prev.safetensors"; }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // What anyone would run again: the resume, or, killed before the run wrote its config.toml,
  // the first command.
  std::string command() const {
    return fs::exists(dir_ + "/config.toml") ? "train --resume " + dir_ : "train " + kFlags + " --out " + dir_;
  }
  std::string next_log() { return logs_ + "/" + std::to_string(++launches_) + ".log"; }

  RunResult launch_sync(const std::string& prefix) {
    const std::string log = next_log();
    const RunResult r = run_shell(prefix + ROSETTA_BIN + " " + command());
    std::ofstream(log) << r.output;
    return r;
  }

  // No launch needs a person: each one trains until the end or until the fault stops it (a
  // signal, exit status 128 + it, or the run's own stop on SIGTERM, 0), never refuses to resume.
  static void require_stopped_by(Proc& p, int code, int sig) {
    INFO(p.output());
    REQUIRE((code == 0 || code == 128 + sig));
  }

  // The signal at a random moment: while the process starts (before or while it reads its
  // checkpoint), or a few updates (0 to 12, a checkpoint every 6) after it began to train, plus
  // 0-4 ms, so that it lands anywhere in an update, a validation or a checkpoint write.
  void signal_at_random(int sig) {
    const int64_t from = last_logged_step(dir_);
    Proc p(command(), next_log());
    if (pick(0, 3) == 0) {
      sleep_ms(pick(0, 250));
    } else {
      const int64_t target = from + pick(1, 12);
      for (int i = 0; i < 30000 && p.running() && last_logged_step(dir_) < target; ++i) sleep_ms(1);
      sleep_ms(pick(0, 4));
    }
    kill(p.pid, sig);
    require_stopped_by(p, p.wait(), sig);
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
    Proc p(command(), next_log());
    for (int i = 0; i < 30000 && p.running() && last_logged_step(dir_) < from + 30; ++i) sleep_ms(1);
    kill(p.pid, SIGKILL);
    require_stopped_by(p, p.wait(), SIGKILL);
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

  std::string dir_, logs_;
  std::mt19937_64 rng_;
  std::map<std::string, int> applied_;
  int launches_ = 0;
};

}  // namespace

TEST_CASE("a schedule of faults: the run resumes after each and ends as if never interrupted", "[faults][schedule]") {
  const int64_t faults = kFaults;
  const uint64_t seed = uint64_t(env_int("ROSETTA_FAULT_SEED", 1));
  TempDir work("fault_schedule");
  const std::string straight = work / "straight";
  const RunResult r = run_rosetta("train " + kFlags + " --out " + straight);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  Schedule schedule(work, seed);
  for (int64_t i = 0; i < faults; ++i) schedule.next();
  schedule.finish();
  const std::string dir = schedule.dir();
  std::string counts;
  int total = 0;
  for (const auto& [kind, n] : schedule.applied()) {
    counts += "\n  " + std::to_string(n) + " x " + kind;
    total += n;
  }
  WARN("fault schedule (seed " << seed << "): " << total << " faults in " << schedule.launches()
                               << " launches, all resumed:" << counts);
  REQUIRE(total == faults);

  // Bit for bit: every tensor of the checkpoint (weights, optimizer state, progress) and of the
  // best model; every metrics record and validation translation.
  REQUIRE(rosetta::load_safetensors(dir + "/checkpoint.safetensors").metadata.at("train.step") ==
          std::to_string(kSteps));
  REQUIRE(tensors_checksum_of(dir + "/checkpoint.safetensors") == tensors_checksum_of(straight + "/checkpoint.safetensors"));
  REQUIRE(tensors_checksum_of(dir + "/best.safetensors") == tensors_checksum_of(straight + "/best.safetensors"));
  REQUIRE(timeless(dir + "/metrics.jsonl") == timeless(straight + "/metrics.jsonl"));
  REQUIRE(slurp(dir + "/translations.jsonl") == slurp(straight + "/translations.jsonl"));
  REQUIRE(fs::is_regular_file(dir + "/report.html"));
  // Nothing left behind by the writes the faults cut short.
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE(e.path().string().find(".tmp.") == std::string::npos);
}
