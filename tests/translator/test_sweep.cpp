// A sweep's bookkeeping from the library (translator/sweep.h): the grid, the records of
// results.jsonl (written and read back), a run's summary from its metrics.jsonl, and the table
// sorted by the selection metric.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "rosetta/core/io.h"
#include "rosetta/translator/sweep.h"
#include "support.h"

using namespace rosetta;
namespace fs = std::filesystem;

namespace {
struct Dir {
  fs::path path = fs::temp_directory_path() / ("rosetta-test-sweep-" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    write_file_atomic((path / name).string(), text);
    return (path / name).string();
  }
};
}  // namespace

TEST_CASE("read_sweep_grid reads NAME FLAGS lines and names the line of a bad one", "[train][sweep]") {
  Dir d;
  const auto grid = translator::read_sweep_grid(d.file("g.txt", "# comment\n\na --lr 1e-3\r\nb\n"));
  REQUIRE(grid.size() == 2);
  CHECK(grid[0].name == "a");
  CHECK(grid[0].flags == std::vector<std::string>{"--lr", "1e-3"});
  CHECK(grid[0].where == d.file("g.txt", "# comment\n\na --lr 1e-3\r\nb\n") + ":3");
  CHECK(grid[1].flags.empty());
  CHECK(translator::read_sweep_grid(d.file("bom.txt", "\xEF\xBB\xBF" "a --lr 1\n"))[0].name == "a");  // as an editor saves it
  CHECK_THROWS_WITH(translator::read_sweep_grid(d.file("dup.txt", "a\na --lr 1\n")),
                    Catch::Contains("dup.txt:2: the name 'a' is already used at"));
  CHECK_THROWS_WITH(translator::read_sweep_grid(d.file("out.txt", "a --out x\n")),
                    Catch::Contains("out.txt:1: --out is set by the sweep"));
  CHECK_THROWS_WITH(translator::read_sweep_grid(d.file("name.txt", "-a\n")), Catch::Contains("name.txt:1: '-a' is not a name"));
  CHECK_THROWS_WITH(translator::read_sweep_grid(d.file("empty.txt", "# nothing\n")),
                    Catch::Contains("no configurations"));
}

TEST_CASE("a sweep record summarizes metrics.jsonl and survives results.jsonl", "[train][sweep]") {
  Dir d;
  const std::string metrics = d.file("metrics.jsonl",
                                     "{\"kind\":\"train\",\"step\":50,\"epoch\":1,\"loss\":5,\"elapsed_s\":10}\n"
                                     "{\"kind\":\"valid\",\"step\":100,\"loss\":3.5,\"bleu\":4,\"chrf\":20,\"elapsed_s\":20}\n"
                                     "not json\n"
                                     "{\"kind\":\"valid\",\"step\":200,\"loss\":3.6,\"bleu\":5,\"chrf\":19,\"elapsed_s\":41}\n");
  translator::SweepRecord r;
  r.name = "a";
  r.flags = "--lr 1e-3";
  r.status = "done";
  r.max_time = "13m";
  r.common = {"--train", "t.tsv"};
  r.wall_s = 50;
  r.summarize(metrics);
  CHECK(r.updates == 200);
  CHECK(r.epochs == 1);
  CHECK(r.train_s == 41);
  CHECK(r.best_valid_loss == 3.5);
  CHECK(r.best_valid_bleu == 5);
  CHECK(r.best_valid_chrf == 20);
  CHECK(r.bleu_at_best_loss == 4);  // the BLEU of the checkpoint best by loss
  CHECK_FALSE(r.load_before.has_value());

  const auto back = translator::read_sweep_records(d.file("results.jsonl", r.to_json() + "\n"));
  REQUIRE(back.size() == 1);
  CHECK(back[0].to_json() == r.to_json());
  CHECK(back[0].common == r.common);
  CHECK_THAT(r.to_json(), Catch::Contains("\"updates\":200,") && Catch::Contains("\"best_valid_loss\":3.5,"));
  CHECK_THROWS_WITH(translator::read_sweep_records(d.file("bad.jsonl", r.to_json() + "\n{\"name\":1}\n")),
                    Catch::Contains("bad.jsonl:2: not a sweep record"));
}

TEST_CASE("sweep_table sorts by the selection metric, unselectable runs last", "[train][sweep]") {
  auto record = [](const char* name, const char* status, std::optional<double> bleu, std::optional<double> loss) {
    translator::SweepRecord r;
    r.name = name, r.status = status, r.best_valid_bleu = bleu, r.best_valid_loss = loss;
    return r;
  };
  std::vector<translator::SweepRecord> rs = {record("low", "done", 3, 3.1), record("failed", "failed", 9, 2.0),
                                        record("none", "done", std::nullopt, std::nullopt),
                                        record("high", "done", 6, 3.4)};
  std::string t = translator::sweep_table(rs, translator::BestMetric::bleu);
  CHECK(rs[0].name == "high");
  CHECK(rs[1].name == "low");
  CHECK_THAT(t, Catch::Contains("| * | high |"));
  CHECK(t.find("| high |") < t.find("| low |"));
  t = translator::sweep_table(rs, translator::BestMetric::loss);
  CHECK(rs[0].name == "low");  // lowest loss among the finished runs, not the failed one
  CHECK(*rs[0].metric(translator::BestMetric::loss) == -3.1);
  CHECK_FALSE(rs[2].metric(translator::BestMetric::loss).has_value());
  std::vector<translator::SweepRecord> none = {record("f", "failed", 1, 1)};
  CHECK(translator::sweep_table(none, translator::BestMetric::bleu).find("| * |") == std::string::npos);
}

namespace {
// A sweep's runs played without training: each `train` writes the metrics.jsonl a run of its
// --lr would (a lower loss for a larger rate), a run named "bad" fails, and `eval` prints scores.
struct FakeRuns {
  std::vector<std::vector<std::string>> commands;
  int operator()(const std::vector<std::string>& args, int out_fd, int err_fd) {
    commands.push_back(args);
    if (args[0] == "eval") {
      const std::string scores = "{\"bleu\": 12.5, \"chrf\": 40}\n";
      REQUIRE(::write(out_fd, scores.data(), scores.size()) == ssize_t(scores.size()));
      return 0;
    }
    const std::string dir = args[2];
    if (dir.ends_with("/bad")) {
      const std::string error = "rosetta: error: --lr must be positive, got -1\n";
      REQUIRE(::write(err_fd, error.data(), error.size()) == ssize_t(error.size()));
      return 1 << 8;  // exit status 1
    }
    const double lr = std::stod(args[std::find(args.begin(), args.end(), "--lr") - args.begin() + 1]);
    fs::create_directories(dir);
    write_file_atomic(dir + "/metrics.jsonl", "{\"kind\":\"train\",\"step\":4,\"epoch\":0,\"loss\":5,\"elapsed_s\":1}\n"
                                              "{\"kind\":\"valid\",\"step\":4,\"loss\":" + std::to_string(4 - lr * 100) +
                                              ",\"bleu\":" + std::to_string(lr * 1000) + ",\"chrf\":30,\"elapsed_s\":2}\n");
    return 0;
  }
};
}  // namespace

TEST_CASE("run_sweep runs the plan through its hooks, records each run and selects the best", "[train][sweep]") {
  Dir d;
  translator::SweepOptions o;
  o.grid = d.file("grid.txt", "slow --lr 0.001\nbad --lr -1\nfast --lr 0.01\n");
  o.out = (d.path / "out").string();
  o.max_time = "1m";
  o.select = translator::BestMetric::loss;
  o.test = d.file("test.tsv", "a\tb\n");
  o.length_penalty = 0.0001;  // written as the CLI wrote it (fmt's "{}"): 0.0001, not 1e-04
  o.common = {"--task", "copy"};
  FakeRuns runs;
  std::vector<std::string> checked, info, warn, printed;
  translator::SweepHooks h;
  h.run = std::ref(runs);
  h.check_train_flags = [&](const std::vector<std::string>& args) { checked.push_back(args[2]); };
  h.info = [&](const std::string& line) { info.push_back(line); };
  h.warn = [&](const std::string& line) { warn.push_back(line); };
  h.print = [&](const std::string& text) { printed.push_back(text); };

  const auto plan = translator::plan_sweep(o, h);
  REQUIRE(plan.size() == 3);
  REQUIRE(checked.size() == 3);  // every train command checked before anything runs
  REQUIRE(runs.commands.empty());
  const std::string dry = translator::sweep_dry_run(o, plan);
  REQUIRE_THAT(dry, Catch::StartsWith("rosetta train --out " + o.out + "/runs/slow --max-time 1m --task copy --lr 0.001\n"));

  translator::run_sweep(o, plan, h);
  REQUIRE(runs.commands.size() == 4);  // three runs and the selected one's test
  const auto records = translator::read_sweep_records(o.out + "/results.jsonl");
  REQUIRE(records.size() == 3);
  CHECK(records[1].status == "failed");
  CHECK(records[1].error == "--lr must be positive, got -1");
  REQUIRE(warn == std::vector<std::string>{"bad: failed: --lr must be positive, got -1"});
  // Lowest validation loss: fast. Only it is tested, with the sweep's beam and length penalty.
  REQUIRE(runs.commands[3] == std::vector<std::string>{"eval", "--model", o.out + "/runs/fast", "--test", o.test,
                                                       "--beam", "4", "--length-penalty", "0.0001", "--json"});
  REQUIRE_THAT(printed.at(0), Catch::StartsWith("Sorted by best validation loss; * = selected."));
  REQUIRE_THAT(printed.at(1), Catch::StartsWith("\nselected: fast (best valid loss 3.0000): --lr 0.01"));
  REQUIRE(printed.at(2) == "test (" + o.test + "): BLEU 12.50, chrF 40.00\n");
  REQUIRE_THAT(read_file(o.out + "/selected.json"), Catch::Contains("\"select\": \"loss\""));

  // Again: every configuration is recorded, nothing runs but the test.
  const auto again = translator::plan_sweep(o, h);
  REQUIRE(std::all_of(again.begin(), again.end(), [](const translator::SweepStep& s) { return s.args.empty(); }));
  REQUIRE_THAT(translator::sweep_dry_run(o, again), Catch::StartsWith("# slow: recorded in " + o.out + "/results.jsonl, skipped\n"));

  // Interrupted during a run: no record of it, and the error says how to resume.
  translator::SweepOptions o2 = o;
  o2.out = (d.path / "out2").string();
  o2.test.clear();
  bool stop = false;
  h.run = [&](const std::vector<std::string>& args, int out_fd, int err_fd) {
    stop = true;
    return runs(args, out_fd, err_fd);
  };
  h.interrupted = [&] { return stop; };
  REQUIRE_THROWS_WITH(translator::run_sweep(o2, translator::plan_sweep(o2, h), h),
                      Catch::StartsWith("interrupted during run slow (kept in " + o2.out + "/runs/slow)"));
  REQUIRE(translator::read_sweep_records(o2.out + "/results.jsonl").empty());
}
