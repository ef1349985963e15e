// loss_chart (report.h), the chart of `rosetta plot`: the curves a run's metrics.jsonl holds, a
// malformed line skipped and named as it is read, no records an error naming the file.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rosetta/core/io.h"
#include "rosetta/report/report.h"

namespace fs = std::filesystem;

TEST_CASE("loss_chart draws a run's curves and names the lines it skips", "[report]") {
  const fs::path dir = fs::temp_directory_path() / ("rosetta-test-plot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string metrics = (dir / "metrics.jsonl").string();
  rosetta::write_file_atomic(metrics, "{\"kind\":\"train\",\"step\":1,\"loss\":5}\n"
                                      "{\"kind\":\"train\",\"step\":2,\"loss\":4}\n"
                                      "{\"kind\":\"valid\",\"step\":2,\"loss\":4.5,\"bleu\":3}\n"
                                      "{\"kind\":\"train\",\"st");  // cut off by a kill
  std::vector<std::string> warned;
  const rosetta::report::LossChart chart =
      rosetta::report::loss_chart(dir.string(), [&](const std::string& line) { warned.push_back(line); });
  CHECK(chart.train_points == 2);
  CHECK(chart.valid_points == 1);
  CHECK_THAT(chart.svg, Catch::Contains("<svg ") && Catch::Contains("valid BLEU"));
  REQUIRE(warned == std::vector<std::string>{metrics + ":4: skipped: not a JSON object (a truncated or malformed line)"});

  rosetta::write_file_atomic(metrics, "{\"kind\":\"eval\"}\n");
  CHECK_THROWS_WITH(rosetta::report::loss_chart(dir.string()), metrics + " has no training records");
  fs::remove_all(dir);
}
