// rosetta report: one self-contained HTML page about one or more training runs (report.h).
#include "commands.h"
#include "log.h"
#include "rosetta/report/report.h"
#include "layers.h"
#include "rosetta/core/tensor.h"
#include "text_io.h"

namespace rosetta::cli {

namespace {
struct ReportArgs {
  std::vector<std::string> runs;
  std::string out;
  bool no_attention = false;
  int threads = 0;
};

void run_report(const ReportArgs& a) {
  check_output_path(a.out, "--out");
  set_num_threads(a.threads);
  ReportOptions o;
  o.attention = !a.no_attention;
  std::vector<std::string> warnings;
  const std::string page = report_html(a.runs, o, &warnings);
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  write_text(a.out, page);
  if (!a.out.empty() && a.out != "-")
    spdlog::info("wrote {} ({} run{})", a.out, a.runs.size(), a.runs.size() > 1 ? "s" : "");
}
}  // namespace

void register_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand("report", "write an HTML report of training runs (curves, configurations, "
                                               "translations over time, attention)");
  cmd->add_option("runs", a->runs, "run directories made by rosetta train (several: overlaid)")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--out", a->out, "HTML file to write ('-': standard output)")->required();
  cmd->add_flag("--no-attention", a->no_attention, "leave out the attention heatmaps (no model is loaded)");
  cmd->add_option("--threads", a->threads, "threads (0: default)")->check(CLI::Range(0, 1024));
  cmd->callback([a] { run_report(*a); });
}

}  // namespace rosetta::cli
