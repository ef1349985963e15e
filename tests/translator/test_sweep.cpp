// A sweep's bookkeeping from the library (translator/sweep.h): the grid, the records of
// results.jsonl (written and read back), a run's summary from its metrics.jsonl, and the table
// sorted by the selection metric.
#include <unistd.h>

#include <filesystem>

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

TEST_CASE("sweep_table sorts by the selection metric; unselectable runs go last", "[train][sweep]") {
  auto record = [](const char* name, const char* status, std::optional<double> bleu, std::optional<double> loss) {
    translator::SweepRecord r;
    r.name = name, r.status = status, r.best_valid_bleu = bleu, r.best_valid_loss = loss;
    return r;
  };
  std::vector<translator::SweepRecord> rs = {record("low", "done", 3, 3.1), record("failed", "failed", 9, 2.0),
                                        record("none", "done", std::nullopt, std::nullopt),
                                        record("high", "done", 6, 3.4)};
  std::string t = translator::sweep_table(rs, "bleu");
  CHECK(rs[0].name == "high");
  CHECK(rs[1].name == "low");
  CHECK_THAT(t, Catch::Contains("| * | high |"));
  CHECK(t.find("| high |") < t.find("| low |"));
  t = translator::sweep_table(rs, "loss");
  CHECK(rs[0].name == "low");  // lowest loss among the finished runs, not the failed one
  CHECK(*rs[0].metric("loss") == -3.1);
  CHECK_FALSE(rs[2].metric("loss").has_value());
  std::vector<translator::SweepRecord> none = {record("f", "failed", 1, 1)};
  CHECK(translator::sweep_table(none, "bleu").find("| * |") == std::string::npos);
}
