// rosetta eval: translate a test set and score it; rosetta score: score given translations.
#include <nlohmann/json.hpp>

#include <iostream>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/train/resources.h"
#include "rosetta/report/report.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/metrics.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

// Prints the scores (as JSON: `extra` with them) and returns that JSON.
nlohmann::json report(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, bool as_json,
                      nlohmann::json extra = nlohmann::json::object()) {
  const auto bleu = data::corpus_bleu(hyps, refs);
  const auto chrf = data::corpus_chrf(hyps, refs);
  extra["bleu"] = bleu.score;
  extra["chrf"] = chrf.score;
  extra["bleu_precisions"] = bleu.precisions;
  extra["brevity_penalty"] = bleu.bp;
  extra["hyp_len"] = bleu.hyp_len;
  extra["ref_len"] = bleu.ref_len;
  extra["sentences"] = hyps.size();
  if (as_json) std::cout << extra.dump() << "\n";
  else std::cout << bleu.str() << "\n" << chrf.str() << "\n";
  return extra;
}

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
  const data::Corpus corpus = a.test.empty() ? data::read_aligned(a.src, a.ref) : data::read_tsv(a.test);
  std::vector<std::string> srcs, refs;
  for (const auto& p : corpus.pairs) {
    srcs.push_back(p.src);
    refs.push_back(p.tgt);
  }
  ROSETTA_CHECK(!srcs.empty(), "the test set has no sentence pairs");
  int64_t truncated = 0;
  std::vector<std::vector<nn::Hypothesis>> hyps;
  TranslationProgress progress(int64_t(srcs.size()));
  try {
    hyps = t.translate(srcs, a.decode.options(), a.batch_tokens, &truncated,
                       decoding_check(budget, t.model->options(), a.decode.options(), a.batch_tokens),
                       [&](int64_t n) { progress.add(n); });
  } catch (const Error& e) {
    progress.clear();
    ROSETTA_FAIL(a.test.empty() ? a.src : a.test, ": ", e.what());
  }
  progress.clear();
  if (truncated) spdlog::warn("{} test source(s) were truncated to the model's maximum length", truncated);
  std::vector<std::string> text;
  std::string all;
  for (const auto& h : hyps) {
    text.push_back(h.empty() ? "" : t.codec.decode_target(h[0].tokens));
    all += text.back() + "\n";
  }
  if (!a.output.empty()) write_text(a.output, all);
  nlohmann::json scores = report(text, refs, a.json,
                                 {{"model", t.weights_path}, {"beam", a.decode.beam},
                                  {"length_penalty", a.decode.length_penalty}, {"max_len_a", a.decode.max_len_a},
                                  {"max_len_b", a.decode.max_len_b}});
  // For rosetta report; the scores are printed already, so a run directory that cannot be
  // written to is only a warning.
  scores["test"] = a.test.empty() ? a.src + " / " + a.ref : a.test;
  try {
    write_file_atomic(RunPaths(a.model).eval(), scores.dump(2) + "\n");
  } catch (const Error& e) {
    spdlog::warn("could not write {}: {}", RunPaths(a.model).eval(), e.what());
  }
}

struct ScoreArgs {
  std::string hyp, ref;
  bool json = false;
};

void run_score(const ScoreArgs& a) {
  const auto hyps = read_lines(a.hyp), refs = read_lines(a.ref);
  ROSETTA_CHECK(hyps.size() == refs.size(), a.hyp, " has ", hyps.size(), " lines but ", a.ref, " has ",
                refs.size());
  ROSETTA_CHECK(!hyps.empty(), a.hyp, " is empty");
  for (size_t i = 0; i < refs.size(); ++i)  // named here by file and line (the scorer knows an index)
    ROSETTA_CHECK(!refs[i].empty(), a.ref, ":", i + 1, ": an empty reference (sacreBLEU rejects them too)");
  report(hyps, refs, a.json);
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
