// A schedule that knows its budget (--schedule linear|cosine, translator/src/run_budget.cpp): the
// rate reaches its floor (--decay-to x --lr) at the last update of --max-steps, and within one
// logging interval of the end of --max-time, whose updates are estimated as the run goes; a
// resumed run continues with the same rates (bit for bit with --max-steps); a budget no longer
// than the warm-up is refused with one line naming both. Tagged [budget].
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cli_support.h"

namespace {

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::checkpoint_step;
using rosetta::test::read_jsonl;
using rosetta::test::require_error;
using rosetta::test::run_rosetta;
using rosetta::test::tensors_checksum_of;
using rosetta::test::train_values;
namespace fs = std::filesystem;

// A copy-task run of a few hundred updates a second on one thread; validation only at the end.
const std::string kFlags =
    "train --task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
    "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 400 "
    "--copy-valid-size 10 --valid-bleu-sentences 5 --threads 1 --validate-every 0 --lr 3e-3 --decay-to 0.1";
constexpr double kPeak = 3e-3, kFloor = 3e-4;

// A field of each logged update of a run, by step.
std::map<int64_t, double> logged(const std::string& dir, const char* field) {
  const auto values = train_values(read_jsonl(dir + "/metrics.jsonl"), field);
  return {values.begin(), values.end()};
}

// The learning rate of each logged update of a run, by step.
std::map<int64_t, double> rates(const std::string& dir) { return logged(dir, "lr"); }

// Continues the run in `dir` from the checkpoint before its last (checkpoint.prev.safetensors),
// as if it had been stopped there; returns the step it resumes at.
int64_t roll_back_to_previous_checkpoint(const std::string& dir) {
  fs::rename(dir + "/checkpoint.prev.safetensors", dir + "/checkpoint.safetensors");
  return checkpoint_step(dir);
}

}  // namespace

TEST_CASE("a budget of --max-steps: the rate at the last update is the floor, and a resume changes no bit", "[budget]") {
  for (const std::string schedule : {"linear", "cosine"}) {
    INFO("--schedule " << schedule);
    TempDir work("budget_steps");
    const std::string straight = work / "straight", dir = work / "run";
    const std::string flags = kFlags + " --schedule " + schedule + " --warmup 10% --max-steps 40 --log-every 1 "
                                       "--save-every 20 --out ";
    RunResult r = run_rosetta(flags + straight);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.output, Catch::Contains("warmup 4 to 0.003") && Catch::Contains("to 0.0003 at step 40"));
    const auto lr = rates(straight);
    REQUIRE(lr.size() == 40);
    REQUIRE_THAT(lr.at(4), Catch::Matchers::WithinRel(kPeak, 1e-9));  // the warm-up: 10% of 40 updates
    REQUIRE_THAT(lr.at(40), Catch::Matchers::WithinRel(kFloor, 0.05));
    REQUIRE(lr.at(39) > lr.at(40));  // decaying to the end, not held at the floor early
    REQUIRE(lr.at(20) > kFloor + 0.3 * (kPeak - kFloor));

    // The same run stopped at its checkpoint of step 20 and resumed ends bit for bit the same.
    REQUIRE(run_rosetta(flags + dir).exit_code == 0);
    REQUIRE(roll_back_to_previous_checkpoint(dir) == 20);
    r = run_rosetta("train --resume " + dir);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.output, Catch::Contains("resumed at step 20"));
    REQUIRE(checkpoint_step(dir) == 40);
    REQUIRE(rates(dir) == lr);
    REQUIRE(tensors_checksum_of(dir + "/checkpoint.safetensors") == tensors_checksum_of(straight + "/checkpoint.safetensors"));
    REQUIRE(tensors_checksum_of(dir + "/best.safetensors") == tensors_checksum_of(straight + "/best.safetensors"));
  }
}

TEST_CASE("a budget of --max-time: the rate reaches the floor within one logging interval of the end",
          "[budget][alone]") {
  TempDir work("budget_time");
  const std::string dir = work / "run";
  // The logging interval: 100 updates (~40 ms in a release build), fewer where the machine runs
  // fewer than 1,000 updates in the 2 s budget (~250 a second under ASan), so that the run holds
  // ~10 intervals or more; the speed is measured first by a run of 200 updates (its elapsed time
  // between the logs at 100 and 200, which leaves out the process's start).
  const std::string calibration = work / "calibration";
  REQUIRE(run_rosetta(kFlags + " --max-steps 200 --log-every 100 --save-every 0 --out " + calibration).exit_code == 0);
  const auto elapsed = logged(calibration, "elapsed_s");
  REQUIRE(elapsed.size() == 2);
  const double per_second = 100 / (elapsed.at(200) - elapsed.at(100));
  const int64_t every = std::clamp<int64_t>(static_cast<int64_t>(per_second * 2 / 10), 10, 100);
  INFO(per_second << " updates a second measured first: logs every " << every << " updates");
  // No checkpoint before the end: the estimate cannot foresee a stall of the machine in the run's
  // last moments (a checkpoint's fsync on a busy disk).
  const RunResult r = run_rosetta(kFlags + " --schedule linear --warmup 10% --max-time 2 --save-every 0 --log-every " +
                                  std::to_string(every) + " --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("(max-time)"));
  const int64_t steps = checkpoint_step(dir);
  const auto lr = rates(dir);
  REQUIRE(steps >= 5 * every);  // enough updates for the estimate to mean something
  const auto& [last_step, last_lr] = *lr.rbegin();
  INFO("stopped at step " << steps << "; last logged rate " << last_lr << " at step " << last_step);
  REQUIRE(steps - last_step < every);
  REQUIRE(last_lr >= kFloor * (1 - 1e-9));
  // The rate fell all the way, not in a last jump: halfway through it was well above the floor.
  REQUIRE(lr.lower_bound(steps / 2)->second > kFloor + 0.25 * (kPeak - kFloor));
  // Each record holds the estimate of the budget's updates it was logged with: the last one's
  // set the rates of every update after it, up to the end. That schedule reaches its floor within
  // one logging interval of the run's real end (before it, or after it by at most one interval's
  // decay: the rate at the last update). The last *logged* rate can be up to one more interval
  // above that, so it is not the measure (a run slowed down in its last interval, as under ASan,
  // ended ~3% before its estimate and logged a rate 1.2 intervals' decay above the floor).
  const auto records = read_jsonl(dir + "/metrics.jsonl");
  REQUIRE(records.front().contains("budget_steps"));
  int64_t estimate = 0;
  for (const auto& j : records)
    if (j["kind"] == "train") estimate = j["budget_steps"].get<int64_t>();
  INFO("the estimate in force at the end: " << estimate << " updates");
  REQUIRE(std::abs(estimate - steps) <= every);
}

TEST_CASE("a budget of --max-time: a resumed run continues with the rates its checkpoint's estimate set",
          "[budget][alone]") {
  TempDir work("budget_time_resume");
  const std::string dir = work / "run";
  const std::string flags = kFlags + " --schedule cosine --warmup 20 --max-time 1.5 --log-every 1 --save-every 25";
  RunResult r = run_rosetta(flags + " --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto before = rates(dir);
  const int64_t resumed = roll_back_to_previous_checkpoint(dir);
  REQUIRE(resumed > 20);  // in the decay
  // The run had time left at that checkpoint: the resumed one makes at least one update with it.
  r = run_rosetta("train --resume " + dir);
  REQUIRE(r.exit_code == 0);
  const auto after = rates(dir);
  REQUIRE(after.count(resumed + 1) == 1);
  // Its first update's rate is the one the saved estimate gives (a fresh estimate would start the
  // decay over from the peak).
  REQUIRE(after.at(resumed + 1) == before.at(resumed + 1));
  REQUIRE(after.at(resumed + 1) < 0.99 * kPeak);
}

TEST_CASE("a budget no longer than the warm-up, or none, is refused with one line", "[budget]") {
  TempDir work("budget_refused");
  require_error(run_rosetta(kFlags + " --schedule linear --max-steps 100 --warmup 300 --out " + (work / "a")),
                {"--max-steps 100", "--warmup 300", "never decay"});
  require_error(run_rosetta(kFlags + " --schedule cosine --warmup 10 --out " + (work / "b")),
                {"--schedule cosine", "--max-steps or --max-time"});
  require_error(run_rosetta(kFlags + " --schedule inverse-sqrt --warmup 5% --out " + (work / "c")),
                {"--warmup 5%", "--max-steps"});
  require_error(run_rosetta(kFlags + " --schedule linear --max-steps 100 --warmup 5x --out " + (work / "d")),
                {"--warmup '5x'"});
  require_error(run_rosetta(kFlags + " --schedule linear --max-steps 100 --warmup 100% --out " + (work / "e")),
                {"--warmup '100%'", "[0%, 100%)"});
  // A time budget is measured first: refused at the first log line, when the speed is known.
  require_error(run_rosetta(kFlags + " --schedule linear --max-time 1 --warmup 100000 --log-every 5 --out " +
                            (work / "f")),
                {"--max-time 1 allows about", "--warmup 100000", "never decay"});
  // A budget that ends before the first log line could measure it, inside the warm-up: refused
  // at its end (a warm-up of 100,000 updates does not fit in 1 s on any machine).
  require_error(run_rosetta(kFlags + " --schedule linear --max-time 1 --warmup 100000 --log-every 1000000 --out " +
                            (work / "g")),
                {"--max-time 1 ended at update", "--warmup 100000", "never decayed"});
  REQUIRE(!fs::exists(work / "a"));  // the ones refused before the run began wrote nothing
}

TEST_CASE("a share of the budget as --warmup round-trips through config.toml", "[budget]") {
  const RunResult r = run_rosetta(kFlags + " --schedule linear --warmup 5% --max-time 13m --dump-config");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("warmup=\"5%\"") && Catch::Contains("decay-to=0.1"));
  TempDir work("budget_config");
  rosetta::test::write_file(work / "c.toml", r.output);
  const RunResult again = run_rosetta("train --config " + (work / "c.toml") + " --dump-config");
  REQUIRE(again.output == r.output);
  // The default stays a number of updates, written as a number.
  REQUIRE_THAT(run_rosetta("train --dump-config").output, Catch::Contains("\nwarmup=300\n"));
}
