// rosetta sweep: a grid of tiny copy-task runs, its records, table and selection; resuming a
// sweep that was cut off; refusing bad grids before training; testing the selected run only.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <thread>

#include "cli_support.h"

using nlohmann::json;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::read_jsonl;
using rosetta::test::run_rosetta;
using rosetta::test::slurp;
namespace fs = std::filesystem;

namespace {

// Tiny models, a few seconds per run. Every 5 updates: a train line, a validation, a checkpoint.
const std::string kCommon =
    "--task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 --max-tokens 256 "
    "--max-len 16 --copy-train-size 200 --copy-valid-size 20 --validate-every 5 --save-every 5 --log-every 5 "
    "--threads 1";


// Writes GRID into the work directory and runs the sweep into work/out.
RunResult sweep(const TempDir& work, const std::string& grid, const std::string& extra = "") {
  rosetta::test::write_file(work / "grid.txt", grid);
  return run_rosetta("sweep --grid " + (work / "grid.txt") + " --out " + (work / "out") + " " + extra + " -- " +
                     kCommon);
}

const json& record(const std::vector<json>& records, const std::string& name) {
  const auto it = std::find_if(records.begin(), records.end(), [&](const json& r) { return r["name"] == name; });
  REQUIRE(it != records.end());
  return *it;
}

}  // namespace

TEST_CASE("a sweep trains every configuration, records it, and selects the best by validation", "[sweep]") {
  TempDir work("sweep");
  const std::string grid = "# learning rates\n\nslow --max-steps 10 --lr 1e-3\nfast  --max-steps 10   --lr 1e-2\n";
  RunResult r = sweep(work, grid);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const auto records = read_jsonl(work / "out/results.jsonl");
  REQUIRE(records.size() == 2);
  for (const json& rec : records) {
    CHECK(rec["status"] == "done");
    CHECK(rec["updates"] == 10);
    CHECK(rec["epochs"].is_number());
    CHECK(rec["wall_s"].get<double>() > 0);
    CHECK(rec["load_before"].is_number());
    // The best valid loss is the lowest of the run's validations, the trained weights' at the end
    // included (best.safetensors keeps the better).
    double lowest = 1e300;
    int trained = 0;
    for (const json& m : read_jsonl(work / ("out/runs/" + rec["name"].get<std::string>() + "/metrics.jsonl"))) {
      if (m["kind"] == "valid" || m["kind"] == "valid_trained") lowest = std::min(lowest, m["loss"].get<double>());
      trained += m["kind"] == "valid_trained";
    }
    CHECK(trained == 1);
    REQUIRE(rec["best_valid_loss"].is_number());
    CHECK(rec["best_valid_loss"].get<double>() == lowest);
  }
  CHECK(record(records, "fast")["flags"] == "--max-steps 10 --lr 1e-2");  // whitespace normalized

  // The selection is the record with the highest best valid BLEU.
  json sel = json::parse(slurp(work / "out/selected.json"));
  const double top = std::max(records[0]["best_valid_bleu"].get<double>(), records[1]["best_valid_bleu"].get<double>());
  CHECK(sel["best_valid_bleu"].get<double>() == top);
  CHECK(record(records, sel["name"].get<std::string>())["best_valid_bleu"].get<double>() == top);
  CHECK_FALSE(sel.contains("test"));
  const std::string md = slurp(work / "out/results.md");
  CHECK_THAT(md, Catch::Contains("| * | " + sel["name"].get<std::string>() + " |"));
  CHECK_THAT(md, Catch::Contains("| slow |") && Catch::Contains("| fast |"));
  CHECK_THAT(r.output, Catch::Contains("selected: " + sel["name"].get<std::string>()));

  // Again with --select loss: nothing is trained, the lowest valid loss is selected.
  r = sweep(work, grid, "--select loss");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("slow: recorded, skipped") && Catch::Contains("fast: recorded, skipped"));
  CHECK(read_jsonl(work / "out/results.jsonl").size() == 2);
  sel = json::parse(slurp(work / "out/selected.json"));
  const double lowest =
      std::min(records[0]["best_valid_loss"].get<double>(), records[1]["best_valid_loss"].get<double>());
  CHECK(record(records, sel["name"].get<std::string>())["best_valid_loss"].get<double>() == lowest);
}

TEST_CASE("a sweep resumes: recorded runs are skipped, a run cut off is continued", "[sweep]") {
  TempDir work("sweep_resume");
  const std::string a = "A --max-steps 10 --lr 3e-3\n";
  RunResult r = sweep(work, a);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto a_ckpt = fs::last_write_time(work / "out/runs/A/checkpoint.safetensors");
  const std::string a_out = slurp(work / "out/runs/A.out");

  // C was cut off after 5 updates (its run directory exists, without a record).
  r = run_rosetta("train --out " + (work / "out/runs/C") + " " + kCommon + " --lr 2e-3 --max-steps 5");
  REQUIRE(r.exit_code == 0);

  // --dry-run shows the plan and runs nothing.
  const std::string abc = a + "B --max-steps 10 --lr 1e-3\nC --max-steps 10 --lr 2e-3\n";
  r = sweep(work, abc, "--dry-run");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("# A: recorded") && Catch::Contains("train --out " + (work / "out/runs/B")) &&
                           Catch::Contains("train --resume " + (work / "out/runs/C")));
  CHECK_FALSE(fs::exists(work / "out/runs/B"));

  r = sweep(work, abc);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::last_write_time(work / "out/runs/A/checkpoint.safetensors") == a_ckpt);
  CHECK(slurp(work / "out/runs/A.out") == a_out);
  CHECK_THAT(slurp(work / "out/runs/C.out"), Catch::Contains("train --resume") && Catch::Contains("resumed at step 5"));
  const auto records = read_jsonl(work / "out/results.jsonl");
  REQUIRE(records.size() == 3);
  CHECK(records[0]["name"] == "A");
  CHECK(record(records, "B")["updates"] == 10);
  CHECK(record(records, "C")["updates"] == 10);
  CHECK(record(records, "C")["status"] == "done");

  // A recorded name whose flags changed is refused, naming it, before anything runs.
  r = sweep(work, "A --max-steps 10 --lr 5e-3\n");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("grid.txt:1") && Catch::Contains("'A'") && Catch::Contains("new name"));
  CHECK(read_jsonl(work / "out/results.jsonl").size() == 3);
}

TEST_CASE("a failed run is recorded and the sweep goes on, an interrupted run is not recorded", "[sweep]") {
  TempDir work("sweep_fail");
  // Without clipping, --lr 1e30 makes the loss non-finite within a few updates: the run fails.
  RunResult r = sweep(work, "boom --max-steps 10 --lr 1e30 --clip 0 --on-nonfinite stop\nok --max-steps 10\n");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto records = read_jsonl(work / "out/results.jsonl");
  REQUIRE(records.size() == 2);
  CHECK(record(records, "boom")["status"] == "failed");
  CHECK_THAT(record(records, "boom")["error"].get<std::string>(), Catch::Contains("non-finite loss"));
  CHECK(record(records, "ok")["status"] == "done");
  CHECK(json::parse(slurp(work / "out/selected.json"))["name"] == "ok");

  // SIGINT to the sweep during a long run: the run saves a checkpoint and stops, and the sweep
  // exits 1 without recording it or starting the next configuration.
  TempDir work2("sweep_int");
  rosetta::test::write_file(work2 / "grid.txt", "long --max-steps 1000000\nlater --max-steps 10\n");
  std::vector<std::string> args{ROSETTA_BIN, "sweep", "--grid", work2 / "grid.txt", "--out", work2 / "out", "--"};
  std::istringstream common(kCommon);
  args.insert(args.end(), std::istream_iterator<std::string>(common), {});
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    freopen((work2 / "log").c_str(), "w", stderr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (int i = 0; i < 600 && !fs::exists(work2 / "out/runs/long/checkpoint.safetensors"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pid, SIGINT);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO(slurp(work2 / "log"));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
  CHECK_THAT(slurp(work2 / "log"), Catch::Contains("interrupted during run long"));
  CHECK_FALSE(fs::exists(work2 / "out/results.jsonl"));
  CHECK_FALSE(fs::exists(work2 / "out/runs/later"));
  CHECK_THAT(slurp(work2 / "out/runs/long.out"), Catch::Contains("(interrupted)"));

  // The same sweep (its budget now spent: --max-steps 1) continues it, and goes on.
  rosetta::test::write_file(work2 / "grid.txt", "long --max-steps 1\nlater --max-steps 10\n");
  r = run_rosetta("sweep --grid " + (work2 / "grid.txt") + " --out " + (work2 / "out") + " -- " + kCommon);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  records = read_jsonl(work2 / "out/results.jsonl");
  REQUIRE(records.size() == 2);
  CHECK(record(records, "long")["updates"].get<int64_t>() >= 5);  // it had saved at least one checkpoint
  CHECK_THAT(slurp(work2 / "out/runs/long.out"), Catch::Contains("resumed at step"));
}

TEST_CASE("a sweep refuses a bad grid with one line, before training", "[sweep]") {
  TempDir work("sweep_bad");
  // An empty `grid`: no grid file at all.
  auto refused = [&](const std::string& grid, const std::vector<std::string>& expected) {
    const RunResult r = grid.empty() ? run_rosetta("sweep --grid " + (work / "missing.txt") + " --out " +
                                                   (work / "out") + " -- " + kCommon)
                                     : sweep(work, grid);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
    CHECK_THAT(r.output, Catch::StartsWith("rosetta: error: "));
    for (const std::string& e : expected) CHECK_THAT(r.output, Catch::Contains(e));
    CHECK_FALSE(fs::exists(work / "out"));
  };
  refused("", {"missing.txt"});
  refused("# only a comment\n\n", {"grid.txt", "no configurations"});
  refused("x --lr 1e-3\n\nx --lr 2e-3\n", {"grid.txt:3", "'x'", "grid.txt:1"});
  refused("ok --lr 1e-3\nbad/name --lr 1e-3\n", {"grid.txt:2", "'bad/name'"});
  refused("--lr 1e-3\n", {"grid.txt:1", "'--lr'"});
  refused("ok --lr 1e-3\ntypo --lrr 1e-3\n", {"grid.txt:2", "--lrr"});
  refused("ok --lr -1\n", {"grid.txt:1", "--lr must be positive"});
  refused("ok --out elsewhere\n", {"grid.txt:1", "--out"});
}

TEST_CASE("a sweep with --test evaluates the selected run only", "[sweep]") {
  TempDir work("sweep_test");
  rosetta::test::write_file(work / "test.tsv", "3 1 4\t3 1 4\n0 7 2 6\t0 7 2 6\n5 5 1 2 3\t5 5 1 2 3\n");
  const RunResult r = sweep(work, "p --max-steps 10 --lr 1e-3\nq --max-steps 10 --lr 5e-3\n",
                            "--test " + (work / "test.tsv") + " --beam 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json sel = json::parse(slurp(work / "out/selected.json"));
  const std::string name = sel["name"], other = name == "p" ? "q" : "p";
  REQUIRE(sel.contains("test"));
  CHECK(sel["test"]["sentences"] == 3);
  CHECK(sel["test"]["beam"] == 2);
  CHECK(sel["test"]["bleu"].is_number());
  // One evaluation: the selected run's test output exists, the other's does not.
  CHECK(fs::exists(work / ("out/runs/" + name + ".test.json")));
  CHECK_FALSE(fs::exists(work / ("out/runs/" + other + ".test.json")));
  CHECK_THAT(r.output, Catch::Contains("test ("));
}
