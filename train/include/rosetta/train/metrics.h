// A metrics log: one JSON object per line (JSONL), appended and flushed record by record, so a
// reader (rosetta report, a plot script) sees every finished record while training runs.
#pragma once

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace rosetta::train {

// A field's value; a non-finite double is written as null.
using MetricValue = std::variant<int64_t, double, std::string>;
using MetricRecord = std::vector<std::pair<std::string, MetricValue>>;

class MetricsLog {
 public:
  // Appends to `path` (created if missing). Throws naming it when it cannot be opened.
  explicit MetricsLog(const std::string& path);
  void write(const MetricRecord& record);

  // The record as one line of JSON (without the newline), its keys in the record's order (a key
  // given twice keeps its first place and its last value).
  static std::string format(const MetricRecord& record);

  // Keeps the records of `path` whose integer "step" is at most `step` (those a resumed run
  // will not repeat), dropping lines that are not such records, e.g. one cut off by a crash.
  static void truncate(const std::string& path, int64_t step);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace rosetta::train
