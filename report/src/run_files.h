// The files of a run directory as the report reads them (internal to report/src): metrics.jsonl,
// translations.jsonl, config.toml, train.log's facts, eval.json and the best model's attention.
// Nothing here throws for a malformed file: what cannot be read is noted and skipped.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/report/report.h"

namespace rosetta::report::detail {

using json = nlohmann::json;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Problems found while reading: listed on the page, and passed on to the caller.
struct Notes {
  std::vector<std::string> lines;
  void warn(const std::string& line) { lines.push_back(line); }
};

// What train.log says about the data and the model: the message of the last line of each kind.
struct Fact {
  const char* label;
  const char* prefix;  // of the message; dropped when it ends in ": "
};
inline constexpr Fact kFacts[] = {
    {"data", "data: "},
    {"training corpus", "training corpus: "},
    {"validation corpus", "validation corpus: "},
    {"extra pairs", "extra training pairs: "},
    {"length filter", "dropped "},
    {"tokenizer", "tokenizer: "},
    {"subword regularization", "subword regularization: "},
    {"model", "model: "},
    {"schedule", "schedule: "},
    {"kernels", "kernels: "},
    {"best weights", "best weights chosen on all "},
    {"last stop", "stopped at step "},
};

struct Run {
  std::string dir, name, color;
  std::vector<json> train, valid, translations;
  std::vector<std::pair<std::string, std::string>> config;
  std::map<std::string, std::string> facts;  // by Fact::label
  json eval;       // eval.json, or null
  json attention;  // heatmap data, or {"note": why there is none}
};

// Reads run directory `dir` (throws only when it is not a directory); what it cannot read is
// noted in `notes`. The name and color are the page's to set.
Run read_run(const std::string& dir, const ReportOptions& o, Notes& notes);

// One curve per key, averaged over buckets of consecutive records so that at most max_points
// remain (x: the bucket's last step and time).
json curves(const std::vector<json>& records, const std::vector<const char*>& keys, size_t max_points);

// The number at `key` of a record, NaN when it has none.
double number(const json& j, const char* key);

// JSON text, with invalid UTF-8 replaced.
std::string dump(const json& j);

}  // namespace rosetta::report::detail
