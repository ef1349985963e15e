#include "rosetta/train/metrics.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"

namespace rosetta::train {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;  // keys in the order the caller gives them

MetricsLog::MetricsLog(const std::string& path) : path_(path), out_(path, std::ios::app) {
  ROSETTA_CHECK(out_, path, ": cannot open for writing");
}

void MetricsLog::write(const MetricRecord& record) {
  out_ << format(record) << "\n";
  out_.flush();
  ROSETTA_CHECK(out_, path_, ": write failed");
}

std::string MetricsLog::format(const MetricRecord& record) {
  ordered_json j = ordered_json::object();
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
  for (const auto& field : record) {
    const std::string& key = field.first;
    std::visit(
        [&j, &key](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>)
            j[key] = std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr);
          else
            j[key] = v;
        },
        field.second);
  }
  return j.dump();
}

void MetricsLog::truncate(const std::string& path, int64_t step) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) require_regular_file(path);  // a FIFO would block the read
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (j["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

}  // namespace rosetta::train
