// rosetta translate: translate lines from standard input or --input with a trained run.
#include <sstream>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/train/resources.h"
#include "rosetta/core/io.h"
#include "rosetta/report/svg.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

namespace {
struct TranslateArgs {
  std::string model, input = "-", output = "-", attention, checkpoint = "best";
  int n_best = 0, threads = 0;
  DecodeArgs decode;
  int64_t batch_tokens = 2048;
};

// Sources longer than the model's maximum length are cut to it, with a warning (documented in
// the README).
void run(const TranslateArgs& a) {
  // Outputs that cannot be written fail now, not after the work.
  check_output_path(a.output, "--output");
  check_output_path(a.attention, "--attention");
  set_num_threads(a.threads);
  apply_precision(a.decode.precision);
  const MemoryBudget budget(a.decode.memory_limit);  // what is available before loading
  budget.check(loading_plan(weights_to_load(a.model, a.checkpoint)));
  const Translator t = Translator::load(a.model, a.checkpoint);
  const std::vector<std::string> lines = read_lines(a.input);
  const int n_best = std::max(a.n_best, 1);
  const auto options = a.decode.options().beam(std::max(a.decode.beam, n_best)).n_best(n_best);
  int64_t truncated = 0;
  std::vector<std::vector<nn::Hypothesis>> hyps;
  try {
    hyps = t.translate(lines, options, a.batch_tokens, &truncated,
                        decoding_check(budget, t.model->options(), options, a.batch_tokens));
  } catch (const Error& e) {
    ROSETTA_FAIL(a.input == "-" || a.input.empty() ? "<stdin>" : a.input, ": ", e.what());
  }
  if (truncated)
    spdlog::warn("{} input line(s) longer than the model's maximum of {} tokens were truncated", truncated,
                 t.model->options().max_len());
  std::ostringstream out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (a.n_best == 0) {
      out << (hyps[i].empty() ? "" : t.codec.decode_target(hyps[i][0].tokens)) << "\n";
      continue;
    }
    for (const auto& h : hyps[i]) out << i << " ||| " << t.codec.decode_target(h.tokens) << " ||| " << h.score << "\n";
  }
  write_text(a.output, out.str());
  if (!a.attention.empty() && !lines.empty() && !hyps[0].empty()) {
    std::vector<int32_t> src = t.codec.encode_source(lines[0]);
    if (int64_t(src.size()) > t.model->options().max_len()) src.resize(size_t(t.model->options().max_len()));
    if (src.empty()) src.push_back(3);
    const auto& best = hyps[0][0].tokens;
    const Tensor w = attention_map(*t.model, src, best, 2);
    std::vector<std::string> rows = t.codec.target_pieces(best), cols = t.codec.source_pieces(lines[0]);
    rows.push_back("</s>");
    cols.resize(src.size(), "</s>");
    write_text(a.attention, heatmap_svg("cross-attention, last decoder layer (mean over heads): " + lines[0], w,
                                        rows, cols));
  } else if (!a.attention.empty()) {
    spdlog::warn("--attention {}: not written: the input has no first line with a translation to show", a.attention);
  }
}
}  // namespace

void register_translate(CLI::App& app) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* cmd = app.add_subcommand("translate", "translate lines from standard input (or --input)");
  cmd->add_option("--model", a->model, "run directory made by rosetta train")->required();
  cmd->add_option("--checkpoint", a->checkpoint, kCheckpointHelp)->check(CLI::IsMember(kCheckpointChoices));
  cmd->add_option("--input", a->input, "input file, one sentence per line (default: standard input)");
  cmd->add_option("--output", a->output, "output file (default: standard output)");
  add_decode_options(*cmd, a->decode);
  cmd->add_option("--n-best", a->n_best, "print the N best as 'line ||| translation ||| score'")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--batch-tokens", a->batch_tokens, "source tokens per batch")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--attention", a->attention, "write the first sentence's cross-attention heatmap (SVG)");
  cmd->add_option("--threads", a->threads, "threads (0: default)")->check(CLI::Range(0, 1024));
  cmd->callback([a] { run(*a); });
}

}  // namespace rosetta::cli
