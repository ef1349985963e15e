// Tokenizer: SentencePiece training, round trips, fixed special ids, persistence, errors.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/random.h"
#include "rosetta/data/tokenizer.h"
#include "temp_files.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;

namespace {

// A few hundred sentences from a small German-ish vocabulary, reproducible from `seed`.
std::vector<std::string> make_sentences(size_t n, uint64_t seed = 7) {
  static const char* kWords[] = {"der", "Hund", "läuft", "schnell", "über", "die", "Straße",
                                 "eine", "Katze", "schläft", "im", "Garten", "heute", "Morgen",
                                 "wir", "essen", "Äpfel", "und", "Brot", "groß", "klein"};
  rosetta::Generator g(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const size_t len = 3 + g.next_below(8);
    std::string s;
    for (size_t j = 0; j < len; ++j) {
      if (j) s += ' ';
      s += kWords[g.next_below(std::size(kWords))];
    }
    out.push_back(s + (i % 3 == 0 ? "?" : "."));
  }
  return out;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = make_sentences(300);
  return c;
}

const Tokenizer& small_unigram() {
  static const Tokenizer t = Tokenizer::train(corpus(), TokenizerOptions().vocab_size(60));
  return t;
}

}  // namespace

TEST_CASE("tokenizer: unigram and BPE round trip encode -> decode", "[data]") {
  for (const auto model : {TokenizerModel::unigram, TokenizerModel::bpe}) {
    const Tokenizer tok =
        model == TokenizerModel::unigram
            ? small_unigram()
            : Tokenizer::train(corpus(), TokenizerOptions().vocab_size(60).model(model));
    CAPTURE(int(model));
    REQUIRE(tok.loaded());
    CHECK(tok.vocab_size() > 4);
    CHECK(tok.vocab_size() <= 60);
    for (const std::string& s : corpus()) {
      const std::vector<int32_t> ids = tok.encode(s);
      REQUIRE_FALSE(ids.empty());
      for (const int32_t id : ids) {
        REQUIRE(id > kEosId);  // no specials, no unk: every character was seen in training
        REQUIRE(id < tok.vocab_size());
      }
      REQUIRE(tok.decode(ids) == s);
    }
    // Unseen text still round-trips when its characters are known.
    CHECK(tok.decode(tok.encode("Katze Hund Brot.")) == "Katze Hund Brot.");
  }
}

TEST_CASE("tokenizer: special ids are fixed pad=0 unk=1 bos=2 eos=3", "[data]") {
  const Tokenizer& tok = small_unigram();
  CHECK(tok.id_to_piece(kPadId) == "<pad>");
  CHECK(tok.id_to_piece(kUnkId) == "<unk>");
  CHECK(tok.id_to_piece(kBosId) == "<s>");
  CHECK(tok.id_to_piece(kEosId) == "</s>");
  CHECK(tok.piece_to_id("</s>") == kEosId);
  CHECK(tok.piece_to_id("no-such-piece") == kUnkId);

  // decode skips pad/bos/eos wherever they are.
  const std::string text = "der Hund schläft.";
  std::vector<int32_t> ids = tok.encode(text);
  ids.insert(ids.begin(), kBosId);
  ids.push_back(kEosId);
  ids.push_back(kPadId);
  ids.push_back(kPadId);
  CHECK(tok.decode(ids) == text);

  // Characters never seen in training map to unk.
  const std::vector<int32_t> unk = tok.encode("✓");
  CHECK(std::find(unk.begin(), unk.end(), kUnkId) != unk.end());
}

TEST_CASE("tokenizer: training is deterministic", "[data]") {
  const auto opts = TokenizerOptions().vocab_size(60);
  const Tokenizer a = Tokenizer::train(corpus(), opts);
  const Tokenizer b = Tokenizer::train(corpus(), opts);
  REQUIRE(a.vocab_size() == b.vocab_size());
  for (int32_t id = 0; id < a.vocab_size(); ++id) REQUIRE(a.id_to_piece(id) == b.id_to_piece(id));
  CHECK(a.serialized() == b.serialized());
  // Different text gives a different model (the check above can fail).
  const Tokenizer c = Tokenizer::train(make_sentences(300, 99), opts);
  CHECK(c.serialized() != a.serialized());
}

TEST_CASE("tokenizer: save/load and serialized round trip", "[data]") {
  rosetta::test::TempDir dir;
  const Tokenizer& tok = small_unigram();
  const auto path = dir.path() / "de.model";
  tok.save(path);
  const Tokenizer loaded = Tokenizer::load(path);
  CHECK(loaded.vocab_size() == tok.vocab_size());
  CHECK(loaded.encode(corpus()[5]) == tok.encode(corpus()[5]));

  const Tokenizer mem = Tokenizer::from_serialized(tok.serialized());
  CHECK(mem.encode(corpus()[9]) == tok.encode(corpus()[9]));

  const Tokenizer copy = tok;  // copies are independent processors of the same model
  CHECK(copy.serialized() == tok.serialized());
}

TEST_CASE("tokenizer: training from a file", "[data]") {
  rosetta::test::TempDir dir;
  std::string text = "\xEF\xBB\xBF";  // BOM, CRLF and a blank line are tolerated
  for (const std::string& s : corpus()) text += s + "\r\n";
  text += "\r\n";
  const auto path = dir.write("train.txt", text);
  const Tokenizer from_file = Tokenizer::train_file(path, TokenizerOptions().vocab_size(60));
  CHECK(from_file.serialized() == small_unigram().serialized());
  const auto bad = dir.write("bad.txt", "gut\nschlecht \xC3\n");
  CHECK_THROWS_WITH(Tokenizer::train_file(bad), Contains("bad.txt:2: invalid UTF-8 at byte 10"));
}

TEST_CASE("tokenizer: vocabulary larger than the text clamps, or throws when hard", "[data]") {
  const Tokenizer soft = Tokenizer::train(corpus(), TokenizerOptions().vocab_size(5000));
  CHECK(soft.vocab_size() < 5000);
  CHECK(soft.decode(soft.encode(corpus()[0])) == corpus()[0]);
  CHECK_THROWS_AS(
      Tokenizer::train(corpus(), TokenizerOptions().vocab_size(5000).hard_vocab_limit(true)),
      rosetta::Error);
}

TEST_CASE("tokenizer: errors are rosetta::Error with a readable message", "[data]") {
  // Smaller than the alphabet.
  CHECK_THROWS_WITH(Tokenizer::train(corpus(), TokenizerOptions().vocab_size(10)),
                    Contains("vocab_size 10") && Contains("Vocabulary size is smaller"));
  CHECK_THROWS_WITH(Tokenizer::train({}, {}), Contains("no training text"));
  CHECK_THROWS_WITH(Tokenizer::train({"  ", ""}, {}), Contains("no training text"));

  rosetta::test::TempDir dir;
  CHECK_THROWS_WITH(Tokenizer::load(dir.path() / "missing.model"), Contains("no such file"));
  CHECK_THROWS_WITH(Tokenizer::load(dir.path()), Contains("is a directory"));
  const auto junk = dir.write("junk.model", "this is not a protobuf");
  CHECK_THROWS_WITH(Tokenizer::load(junk), Contains("junk.model") && Contains("not a SentencePiece"));

  const Tokenizer& tok = small_unigram();
  CHECK_THROWS_WITH(tok.decode({4, tok.vocab_size()}), Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(tok.decode({-1}), Contains("id -1"));
  const Tokenizer empty;
  CHECK_FALSE(empty.loaded());
  CHECK_THROWS_WITH(empty.encode("x"), Contains("no model loaded"));
}
