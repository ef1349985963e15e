// The run report (`rosetta report`): one self-contained HTML page about one or more training
// runs of the translator: curves (against step or wall time, several runs overlaid),
// configurations side by side, data statistics, test scores, validation translations over time
// and attention heatmaps of the best model. The page fetches nothing: its style sheet, script
// and data are inline.
//
// What it reads from a run directory (all optional but metrics.jsonl; missing parts are noted
// on the page): metrics.jsonl, config.toml, train.log, translations.jsonl, eval.json, and the
// best model (best.safetensors, else checkpoint.safetensors) for the heatmaps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rosetta::report {

// Appends {"step": S, "src": [...], "ref": [...], "hyp": [...]}, the first
// translator::kSampleSentences of each, as one line of RUN/translations.jsonl, flushed: what a
// run's RunHooks::validated records for the report.
void append_translations(const std::string& run_dir, int64_t step, const std::vector<std::string>& src,
                         const std::vector<std::string>& ref, const std::vector<std::string>& hyp);

struct ReportOptions {
  bool attention = true;               // decode the sentences with each run's best model
  size_t max_points = 2000;            // per training curve; longer ones are averaged in buckets
  size_t max_translation_rows = 40;    // validations shown per sentence (evenly spaced)
  int64_t max_attention_tokens = 60;   // longer sentences are cut in the heatmaps
};

// The page for the run directories `runs` (one or more). A malformed line of a run's files is
// skipped with a warning naming the file and line, listed on the page and appended to
// `warnings` (when given) for the caller to report; throws only when a run directory does not
// exist.
std::string report_html(const std::vector<std::string>& runs, const ReportOptions& options = {},
                        std::vector<std::string>* warnings = nullptr);

// report_html written to `out` atomically.
void write_report(const std::vector<std::string>& runs, const std::string& out, const ReportOptions& options = {},
                  std::vector<std::string>* warnings = nullptr);

// What `rosetta train` does after each validation (its RunHooks::validated) so that the run's
// page follows the run: appends the sample translations, when there are any, to
// translations.jsonl (append_translations) and writes RUN/report.html again (write_report).
// Returns the page's warnings; throws when a file cannot be written.
std::vector<std::string> record_validation(const std::string& run_dir, int64_t step, const std::vector<std::string>& src,
                                           const std::vector<std::string>& ref, const std::vector<std::string>& hyp);

// `rosetta plot`'s chart of a run: the training and validation loss by update step and, on a
// right axis where any was measured, the validation BLEU, as an SVG. `warn` (if given) gets a line
// for each line of metrics.jsonl skipped as it is read (not a JSON object: e.g. the last line of
// a killed run). Throws naming metrics.jsonl when it cannot be read or holds no training records.
struct LossChart {
  std::string svg;
  size_t train_points = 0, valid_points = 0;
};
LossChart loss_chart(const std::string& run_dir, const std::function<void(const std::string&)>& warn = {});

// The page's style sheet and script (report_assets.cpp).
const char* report_css();
const char* report_js();

}  // namespace rosetta::report
