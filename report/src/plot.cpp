// rosetta plot: training and validation curves of a run as an SVG.
#include <nlohmann/json.hpp>

#include <cmath>

#include "commands.h"
#include "log.h"
#include "rosetta/report/svg.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

namespace {
double value(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

void run_plot(const std::string& dir, const std::string& out) {
  check_output_path(out, "--out");
  const RunPaths run(dir);
  const auto lines = read_lines(run.metrics());
  Series train{"train loss", "#1f77b4", {}}, valid{"valid loss", "#d62728", {}}, bleu{"valid BLEU", "#2ca02c", {}};
  size_t n = 0;
  for (const auto& line : lines) {
    ++n;
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {  // as `report` reads it: e.g. the last line of a killed run
      spdlog::warn("{}:{}: skipped: not a JSON object (a truncated or malformed line)", run.metrics(), n);
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
  write_text(out, line_chart_svg("rosetta run " + dir, "update step", "loss (nats per token)", {train, valid},
                                 "BLEU", right));
  spdlog::info("wrote {} ({} training and {} validation points)", out, train.points.size(), valid.points.size());
}
}  // namespace

void register_plot(CLI::App& app) {
  auto dir = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "plot a run's loss curves (and BLEU) as SVG");
  cmd->add_option("--run", *dir, "run directory")->required();
  cmd->add_option("--out", *out, "SVG file to write")->required();
  cmd->callback([dir, out] { run_plot(*dir, *out); });
}

}  // namespace rosetta::cli
