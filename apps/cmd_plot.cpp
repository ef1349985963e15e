// rosetta plot: training and validation curves of a run as an SVG (report.h: loss_chart).
#include "commands.h"
#include "log.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

void register_plot(CLI::App& app) {
  auto dir = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("plot", "plot a run's loss curves (and BLEU) as SVG");
  cmd->add_option("--run", *dir, "run directory")->required();
  cmd->add_option("--out", *out, "SVG file to write")->required();
  cmd->callback([dir, out] {
    check_output_path(*out, "--out");
    const LossChart chart = loss_chart(*dir, [](const std::string& line) { spdlog::warn("{}", line); });
    write_text(*out, chart.svg);
    spdlog::info("wrote {} ({} training and {} validation points)", *out, chart.train_points, chart.valid_points);
  });
}

}  // namespace rosetta::cli
