#include "rosetta/translator/evaluate.h"

#include <nlohmann/json.hpp>

#include "rosetta/core/check.h"

namespace rosetta::translator {

namespace {

// The keys of scores_json; an object's keys are sorted when it is written.
nlohmann::json scores_object(const Scores& s, nlohmann::json out = nlohmann::json::object()) {
  out["bleu"] = s.bleu.score;
  out["chrf"] = s.chrf.score;
  out["bleu_precisions"] = s.bleu.precisions;
  out["brevity_penalty"] = s.bleu.bp;
  out["hyp_len"] = s.bleu.hyp_len;
  out["ref_len"] = s.bleu.ref_len;
  out["sentences"] = s.sentences;
  return out;
}

nlohmann::json evaluation_object(const Evaluation& e) {
  return scores_object(e.scores, {{"model", e.weights},
                                  {"beam", e.search.beam()},
                                  {"length_penalty", e.search.length_penalty()},
                                  {"max_len_a", e.search.max_len_a()},
                                  {"max_len_b", e.search.max_len_b()}});
}

}  // namespace

Scores score_translations(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  return {data::corpus_bleu(hyps, refs), data::corpus_chrf(hyps, refs), int64_t(hyps.size())};
}

Scores score_lines(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                   const std::string& hyp_file, const std::string& ref_file) {
  ROSETTA_CHECK(hyps.size() == refs.size(), hyp_file, " has ", hyps.size(), " lines but ", ref_file, " has ",
                refs.size());
  ROSETTA_CHECK(!hyps.empty(), hyp_file, " is empty");
  for (size_t i = 0; i < refs.size(); ++i)  // named here by file and line (the scorer knows an index)
    ROSETTA_CHECK(!refs[i].empty(), ref_file, ":", i + 1, ": an empty reference (sacreBLEU rejects them too)");
  return score_translations(hyps, refs);
}

std::string scores_text(const Scores& s) { return s.bleu.str() + "\n" + s.chrf.str() + "\n"; }

std::string scores_json(const Scores& s) { return scores_object(s).dump(); }

std::string Evaluation::text() const {
  std::string all;
  for (const std::string& line : translations) all += line + "\n";
  return all;
}

std::string Evaluation::json() const { return evaluation_object(*this).dump(); }

std::string Evaluation::record() const {
  nlohmann::json j = evaluation_object(*this);
  j["test"] = test;
  return j.dump(2) + "\n";
}

TestSet read_test_set(const std::string& tsv, const std::string& src, const std::string& ref) {
  TestSet t;
  t.pairs = (tsv.empty() ? data::read_aligned(src, ref) : data::read_tsv(tsv)).pairs;
  t.file = tsv.empty() ? src : tsv;
  t.name = tsv.empty() ? src + " / " + ref : tsv;
  ROSETTA_CHECK(!t.pairs.empty(), "the test set has no sentence pairs");
  return t;
}

Evaluation evaluate(const Translator& t, const TestSet& test, const nn::SearchOptions& search, int64_t batch_tokens,
                    const BatchCheck& check_batch, const BatchDone& batch_done) {
  std::vector<std::string> srcs, refs;
  for (const auto& p : test.pairs) {
    srcs.push_back(p.src);
    refs.push_back(p.tgt);
  }
  Evaluation e;
  std::vector<std::vector<nn::Hypothesis>> hyps;
  try {
    hyps = t.translate(srcs, search, batch_tokens, &e.truncated, check_batch, batch_done);
  } catch (const Error& x) {
    ROSETTA_FAIL(test.file, ": ", x.what());
  }
  for (const auto& h : hyps) e.translations.push_back(h.empty() ? "" : t.codec.decode_target(h[0].tokens));
  e.scores = score_translations(e.translations, refs);
  e.weights = t.weights_path;
  e.search = search;
  e.test = test.name;
  return e;
}

}  // namespace rosetta::translator
