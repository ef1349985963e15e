// `rosetta plot`'s chart (report.h: loss_chart): a run's loss curves (and BLEU) as an SVG.
#include <nlohmann/json.hpp>

#include <cmath>

#include "rosetta/core/check.h"
#include "rosetta/data/corpus.h"
#include "rosetta/report/report.h"
#include "rosetta/report/svg.h"
#include "rosetta/translator/translator.h"

namespace rosetta::report {

namespace {
double value(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}
}  // namespace

LossChart loss_chart(const std::string& dir, const std::function<void(const std::string&)>& warn) {
  const translator::RunPaths run(dir);
  const auto lines = data::read_lines(run.metrics());
  Series train{"train loss", "#1f77b4", {}}, valid{"valid loss", "#d62728", {}}, bleu{"valid BLEU", "#2ca02c", {}};
  size_t n = 0;
  for (const auto& line : lines) {
    ++n;
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {  // as `report` reads it: e.g. the last line of a killed run
      if (warn) warn(run.metrics() + ":" + std::to_string(n) + ": skipped: not a JSON object (a truncated or malformed line)");
      continue;
    }
    const std::string kind = j.value("kind", "");
    const double step = value(j, "step");
    if (kind == "train") train.points.emplace_back(step, value(j, "loss"));
    if (kind == "valid") {
      valid.points.emplace_back(step, value(j, "loss"));
      bleu.points.emplace_back(step, value(j, "bleu"));
    }
  }
  ROSETTA_CHECK(!train.points.empty() || !valid.points.empty(), run.metrics(), " has no training records");
  std::vector<Series> right;
  bool any_bleu = false;
  for (auto [x, y] : bleu.points) any_bleu = any_bleu || std::isfinite(y);
  if (any_bleu) right.push_back(bleu);
  return {line_chart_svg("rosetta run " + dir, "update step", "loss (nats per token)", {train, valid}, "BLEU", right),
          train.points.size(), valid.points.size()};
}

}  // namespace rosetta::report
