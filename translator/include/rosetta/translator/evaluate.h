// A translator scored on a test set (`rosetta eval`), and translations scored against references
// (`rosetta score`): corpus BLEU and chrF as sacreBLEU computes them (data/metrics.h), as text
// and as the JSON that eval prints with --json and records in the run (eval.json, which
// `rosetta report` shows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rosetta/data/corpus.h"
#include "rosetta/data/metrics.h"
#include "rosetta/nn/search.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

struct Scores {
  data::BleuScore bleu;
  data::ChrfScore chrf;
  int64_t sentences = 0;
};
// Corpus BLEU and chrF of `hyps` against `refs` (one reference each, line-aligned).
Scores score_translations(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);
// score_translations of translations and references read from the files `hyp_file` and
// `ref_file`, line by line. Throws naming the files when their numbers of lines differ or they
// have none, and naming the file and line of an empty reference (sacreBLEU rejects them too).
Scores score_lines(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                   const std::string& hyp_file, const std::string& ref_file);
// sacreBLEU's two lines: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = ...)\nchrF2 = 59.73\n".
std::string scores_text(const Scores& s);
// One line of JSON, keys sorted: bleu, bleu_precisions, brevity_penalty, chrf, hyp_len, ref_len,
// sentences.
std::string scores_json(const Scores& s);

// A test set, read: its sentence pairs, and its names.
struct TestSet {
  std::vector<data::SentencePair> pairs;
  std::string file;  // how errors name it: the TSV file, or the source file
  std::string name;  // how eval.json names it: the TSV file, or "SRC / REF"
};
// Reads a TSV file of source<TAB>reference lines (`tsv`), or else line-aligned source and
// reference files; throws as data::read_tsv and data::read_aligned do, and when it holds no
// sentence pairs.
TestSet read_test_set(const std::string& tsv, const std::string& src, const std::string& ref);

struct Evaluation {
  std::vector<std::string> translations;  // the best translation of each source, in order
  int64_t truncated = 0;                  // sources cut to the model's maximum length
  Scores scores;
  std::string weights;       // the file the model was loaded from
  nn::SearchOptions search;  // what it decoded with
  std::string test;          // TestSet::name

  // The translations, one a line (`rosetta eval --output`).
  std::string text() const;
  // scores_json's keys and the settings: model (the weights file), beam, length_penalty,
  // max_len_a and max_len_b; one line (`rosetta eval --json`).
  std::string json() const;
  // The run's eval.json: json()'s keys and test, indented, with a final newline.
  std::string record() const;
};

// Translates the sources of `test` with `t` (Translator::translate: in batches of `batch_tokens`
// source tokens, `check_batch` and `batch_done` as there) and scores the best translation of
// each against its reference. An error while translating throws with the test set's file in
// front ("test.tsv: ...").
Evaluation evaluate(const Translator& t, const TestSet& test, const nn::SearchOptions& search,
                    int64_t batch_tokens, const BatchCheck& check_batch = {}, const BatchDone& batch_done = {});

}  // namespace rosetta::translator
