// evaluate (rosetta eval): a model's translations of a test set, their scores, and the JSON that
// eval prints and records in eval.json; score_translations and score_lines (rosetta score).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "rosetta/core/io.h"
#include "rosetta/core/random.h"
#include "rosetta/nn/nn.h"
#include "rosetta/translator/evaluate.h"
#include "copy_translator.h"
#include "support.h"

using namespace rosetta;
using json = nlohmann::json;

namespace {

// An untrained copy-task model, as a run's best weights.
translator::Translator copy_model() {
  translator::Translator t = test::copy_translator(5, 1, 8);
  t.weights_path = "run/best.safetensors";
  return t;
}

}  // namespace

TEST_CASE("score_translations gives sacreBLEU's corpus BLEU and chrF, as text and as JSON, and score_lines names bad files", "[evaluate]") {
  const std::vector<std::string> hyps{"the dog sees the ball .", "a cat"}, refs{"the dog sees the ball .", "the cat"};
  const translator::Scores s = translator::score_translations(hyps, refs);
  CHECK(s.bleu.score == data::corpus_bleu(hyps, refs).score);
  CHECK(s.chrf.score == data::corpus_chrf(hyps, refs).score);
  CHECK(s.sentences == 2);
  CHECK(translator::scores_text(s) == s.bleu.str() + "\n" + s.chrf.str() + "\n");
  const std::string line = translator::scores_json(s);
  CHECK(line.find('\n') == std::string::npos);
  const json j = json::parse(line);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"bleu", "bleu_precisions", "brevity_penalty", "chrf", "hyp_len", "ref_len",
                                         "sentences"});
  CHECK(j["bleu"] == s.bleu.score);
  CHECK(j["hyp_len"] == s.bleu.hyp_len);
  CHECK(j["sentences"] == 2);
  CHECK(translator::score_lines(hyps, refs, "h", "r").bleu.score == s.bleu.score);
  REQUIRE_THROWS_WITH(translator::score_lines(hyps, {"x"}, "h.txt", "r.txt"), "h.txt has 2 lines but r.txt has 1");
  REQUIRE_THROWS_WITH(translator::score_lines({}, {}, "h.txt", "r.txt"), "h.txt is empty");
  REQUIRE_THROWS_WITH(translator::score_lines(hyps, {"the dog", ""}, "h.txt", "r.txt"),
                      "r.txt:2: an empty reference (sacreBLEU rejects them too)");
}

TEST_CASE("evaluate translates a test set, scores it, and names the test file in its errors", "[evaluate]") {
  test::ScratchDir dir;
  write_file_atomic(dir.file("test.tsv"), "1 2 3\t1 2 3\n4 5\t4 5\n6 7 8 9\t6 7 8 9\n");
  const translator::Translator t = copy_model();
  const translator::TestSet test = translator::read_test_set(dir.file("test.tsv"), "", "");
  REQUIRE(test.pairs.size() == 3);
  CHECK(test.file == dir.file("test.tsv"));
  CHECK(test.name == dir.file("test.tsv"));
  const auto search = nn::SearchOptions().beam(2).length_penalty(0.5);
  int64_t done = 0;
  const translator::Evaluation e =
      translator::evaluate(t, test, search, 64, {}, [&done](int64_t n) { done += n; });
  CHECK(done == 3);
  // The best hypothesis of each source, decoded, as Translator::translate gives them.
  const auto hyps = t.translate({"1 2 3", "4 5", "6 7 8 9"}, search, 64);
  REQUIRE(e.translations.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(e.translations[i] == t.codec.decode_target(hyps[i][0].tokens));
  CHECK(e.text() == e.translations[0] + "\n" + e.translations[1] + "\n" + e.translations[2] + "\n");
  const auto scores = translator::score_translations(e.translations, {"1 2 3", "4 5", "6 7 8 9"});
  CHECK(e.scores.bleu.score == scores.bleu.score);
  CHECK(e.scores.chrf.score == scores.chrf.score);

  // eval --json: the scores and the settings; eval.json: those and the test set, indented.
  const json line = json::parse(e.json());
  CHECK(line["model"] == "run/best.safetensors");
  CHECK(line["beam"] == 2);
  CHECK(line["length_penalty"] == 0.5);
  CHECK(line["max_len_b"] == 10);
  CHECK(line["sentences"] == 3);
  CHECK_FALSE(line.contains("test"));
  const std::string record = e.record();
  CHECK(record.back() == '\n');
  json expected = line;
  expected["test"] = dir.file("test.tsv");
  CHECK(json::parse(record) == expected);
  CHECK(record == expected.dump(2) + "\n");

  // Aligned files are named by both; an error while translating names the test file.
  write_file_atomic(dir.file("src.txt"), "1 2\nx 3\n");
  write_file_atomic(dir.file("ref.txt"), "1 2\n3\n");
  const translator::TestSet aligned = translator::read_test_set("", dir.file("src.txt"), dir.file("ref.txt"));
  CHECK(aligned.name == dir.file("src.txt") + " / " + dir.file("ref.txt"));
  REQUIRE_THROWS_WITH(translator::evaluate(t, aligned, search, 64),
                      Catch::StartsWith(dir.file("src.txt") + ": line 2"));
}
