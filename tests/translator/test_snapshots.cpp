// The weights snapshots of a run directory (translator.h): step_snapshots lists them by step,
// newest_snapshots picks those `rosetta average --model` averages.
#include <catch2/catch.hpp>

#include "rosetta/core/io.h"
#include "rosetta/translator/translator.h"
#include "support.h"

using namespace rosetta;

TEST_CASE("newest_snapshots takes the highest steps by the number in the name, oldest first", "[snapshots]") {
  test::ScratchDir dir;
  const translator::RunPaths run(dir.path.string());
  REQUIRE_THROWS_WITH(translator::newest_snapshots(run.dir, 5),
                      run.dir + " holds no step-*.safetensors snapshots to average: train with rosetta train "
                                "--keep-checkpoints K to keep the K newest");
  // Written newest first: the order of the file times is not the steps'. Not snapshots: a step
  // spelled with a leading zero, a temporary, another name.
  for (const int64_t step : {100, 20, 9}) write_file_atomic(run.snapshot(step), "x");
  for (const char* other : {"step-020.safetensors", "step-7.safetensors.tmp", "best.safetensors"})
    write_file_atomic(dir.file(other), "x");
  const auto all = translator::step_snapshots(run.dir);
  REQUIRE(all.size() == 3);
  CHECK(all[0] == std::pair<int64_t, std::string>{9, run.snapshot(9)});
  CHECK(all[2] == std::pair<int64_t, std::string>{100, run.snapshot(100)});
  const auto two = translator::newest_snapshots(run.dir, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[0].path == run.snapshot(20));
  CHECK(two[0].step == "20");
  CHECK(two[1].path == run.snapshot(100));
  CHECK(two[1].step == "100");
  const auto more = translator::newest_snapshots(run.dir, 9);  // more than there are: all of them
  REQUIRE(more.size() == 3);
  CHECK(more[0].step == "9");
}
