// rosetta eval: translate a test set and score it; rosetta score: score given translations.
#include <iostream>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/train/resources.h"
#include "rosetta/core/io.h"
#include "rosetta/translator/evaluate.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

struct EvalArgs {
  std::string model, test, src, ref, output, checkpoint = "best";
  int threads = 0;
  DecodeArgs decode;
  int64_t batch_tokens = 2048;
  bool json = false;
};

void run_eval(const EvalArgs& a) {
  check_output_path(a.output, "--output");
  set_num_threads(a.threads);
  apply_precision(a.decode.precision);
  const MemoryBudget budget(a.decode.memory_limit);  // what is available before loading
  budget.check(loading_plan(weights_to_load(a.model, a.checkpoint)));
  const Translator t = Translator::load(a.model, a.checkpoint);
  const TestSet test = read_test_set(a.test, a.src, a.ref);
  TranslationProgress progress(int64_t(test.pairs.size()));
  const Evaluation e =
      evaluate(t, test, a.decode.options(), a.batch_tokens,
               decoding_check(budget, t.model->options(), a.decode.options(), a.batch_tokens),
               [&](int64_t n) { progress.add(n); });
  progress.clear();
  if (e.truncated) spdlog::warn("{} test source(s) were truncated to the model's maximum length", e.truncated);
  if (!a.output.empty()) write_text(a.output, e.text());
  std::cout << (a.json ? e.json() + "\n" : scores_text(e.scores));
  // For rosetta report; the scores are printed already, so a run directory that cannot be
  // written to is only a warning.
  try {
    write_file_atomic(RunPaths(a.model).eval(), e.record());
  } catch (const Error& x) {
    spdlog::warn("could not write {}: {}", RunPaths(a.model).eval(), x.what());
  }
}

struct ScoreArgs {
  std::string hyp, ref;
  bool json = false;
};

void run_score(const ScoreArgs& a) {
  const auto hyps = read_lines(a.hyp), refs = read_lines(a.ref);
  const Scores scores = score_lines(hyps, refs, a.hyp, a.ref);
  std::cout << (a.json ? scores_json(scores) + "\n" : scores_text(scores));
}

}  // namespace

void register_eval(CLI::App& app) {
  auto e = std::make_shared<EvalArgs>();
  CLI::App* eval = app.add_subcommand("eval", "translate a test set and score it (BLEU, chrF)");
  eval->add_option("--model", e->model, "run directory made by rosetta train")->required();
  auto* test = eval->add_option("--test", e->test, "test set, TSV: source<TAB>reference");
  auto* src = eval->add_option("--src", e->src, "test sources (with --ref)");
  auto* ref = eval->add_option("--ref", e->ref, "test references, line-aligned with --src");
  test->excludes(src)->excludes(ref);
  src->needs(ref);
  ref->needs(src);
  eval->add_option("--checkpoint", e->checkpoint, kCheckpointHelp)->check(CLI::IsMember(kCheckpointChoices));
  add_decode_options(*eval, e->decode);
  eval->add_option("--batch-tokens", e->batch_tokens, "source tokens per batch")->check(CLI::Range(1, 1 << 24));
  eval->add_option("--output", e->output, "also write the translations to this file");
  eval->add_option("--threads", e->threads, "threads (0: default)")->check(CLI::Range(0, 1024));
  eval->add_flag("--json", e->json, "machine-readable output");
  eval->callback([e] {
    ROSETTA_CHECK(!e->test.empty() || !e->src.empty(), "give --test FILE.tsv or --src FILE --ref FILE");
    run_eval(*e);
  });

  auto s = std::make_shared<ScoreArgs>();
  CLI::App* score = app.add_subcommand("score", "score translations against references (BLEU, chrF)");
  score->add_option("--hyp", s->hyp, "translations, one per line")->required();
  score->add_option("--ref", s->ref, "references, one per line")->required();
  score->add_flag("--json", s->json, "machine-readable output");
  score->callback([s] { run_score(*s); });
}

}  // namespace rosetta::cli
