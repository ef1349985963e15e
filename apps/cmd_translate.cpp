// rosetta translate: translate lines from standard input or --input with a trained run.
#include <unistd.h>

#include <optional>

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
  bool stream = false, stream_given = false;
};

// Lines are translated a chunk at a time (StreamOptions) and written as each chunk is done; with
// --stream each line as soon as it is read. Sources longer than the model's maximum length are
// cut to it, with a warning (documented in the README).
void run(const TranslateArgs& a) {
  // Outputs that cannot be written fail now, not after the work.
  check_output_path(a.output, "--output");
  check_output_path(a.attention, "--attention");
  set_num_threads(a.threads);
  apply_precision(a.decode.precision);
  const MemoryBudget budget(a.decode.memory_limit);  // what is available before loading
  budget.check(loading_plan(weights_to_load(a.model, a.checkpoint)));
  const Translator t = Translator::load(a.model, a.checkpoint);
  const bool from_stdin = a.input == "-" || a.input.empty();
  data::LineStream in = from_stdin ? data::LineStream(STDIN_FILENO, "<stdin>") : data::LineStream(a.input);
  const bool stream = a.stream_given ? a.stream : from_stdin && isatty(STDIN_FILENO);
  const int n_best = std::max(a.n_best, 1);
  const auto options = a.decode.options().beam(std::max(a.decode.beam, n_best)).n_best(n_best);
  TextOutput out(a.output);
  TranslationProgress progress(in.total_lines());
  std::optional<std::string> first_line;  // and its best translation, for --attention
  std::vector<int32_t> first_best;
  StreamCallbacks callbacks;
  callbacks.emit = [&](int64_t index, const std::string& source, const std::vector<nn::Hypothesis>& hyps) {
    out.write(hypothesis_lines(t.codec, a.n_best, index, hyps));
    if (stream) out.flush();
    if (index == 0 && !hyps.empty()) first_line = source, first_best = hyps[0].tokens;
  };
  callbacks.check_batch = decoding_check(budget, t.model->options(), options, a.batch_tokens);
  if (!stream) callbacks.batch_done = [&](int64_t n) { progress.add(n); };  // a line typed is its own progress
  const StreamCounts counts =
      translate_stream(*t.model, t.codec, in, options, a.batch_tokens, StreamOptions().interactive(stream), callbacks);
  progress.clear();
  out.close();
  if (counts.truncated)
    spdlog::warn("{} input line(s) longer than the model's maximum of {} tokens were truncated", counts.truncated,
                 t.model->options().max_len());
  if (!a.attention.empty() && first_line) {
    write_text(a.attention, attention_heatmap_svg(t, *first_line, first_best));
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
  CLI::Option* stream = cmd->add_flag("--stream,!--no-stream", a->stream,
                                      "translate and write each line as soon as it is read (default: when standard "
                                      "input is a terminal); --no-stream: in chunks of 4096 lines sorted by length");
  cmd->callback([a, stream] {
    a->stream_given = stream->count() > 0;
    run(*a);
  });
}

}  // namespace rosetta::cli
