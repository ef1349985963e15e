// Ding dictionary: line parsing on real-format lines, cleaning, the hash split, and the
// prepare_ding_corpus pipeline on a small file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/data/ding.h"
#include "temp_files.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;
using Pairs = std::vector<SentencePair>;

namespace {

// Lines copied from /usr/share/trans/de-en (trans-de-en 1.9-6), plus a comment header.
const char* kSample =
    "# Version :: devel 2023-01-30\n"
    "# License :: GPL Version 2 or later; GNU General Public License\n"
    "Ablöse {f} /Abl./; Abstandszahlung {f} (Mietobjekt) <Ablösebetrag> | Ungesetzliche Ablösen "
    "können auf dem Klageweg zurückgefordert werden. :: key money [Br.]; premium (on a lease) | "
    "Unlawful premiums may be recovered by action.\n"
    "Abmeldebestätigung {f} | Sie erhalten dann eine Abmeldebestätigung. :: confirmation of "
    "cancellation/departure | Then you’ll get the confirmation of your cancellation.\n"
    "Abneigung {f}; Antipathie {f} (gegen) | sofort eine Abneigung gegen etw. empfinden :: "
    "dislike (of; for) | to take an instant dislike to sth.\n"
    "Scher dich zum Teufel!; Fahr zur Hölle! :: Go to hell!\n"
    "Fleiß {m}; Strebsamkeit {f} | Ohne Fleiß kein Preis.; Vor den Erfolg haben die Götter den "
    "Schweiß gesetzt. [Sprw.]. :: industriousness; industry | No sweet without sweat.; No cross, "
    "no crown. [prov.]\n"
    "Zieh Leine!; Verzieh dich!; Hau ab! [ugs.] :: Get lost!; Beat it! [coll.]\n"
    "Ich vermisse dich/sie.; Du/Sie fehlst/fehlt mir. :: I miss you/her.\n"
    "Scher dich zum Teufel!; Fahr zur Hölle! :: Go to hell!\n";  // a duplicate entry

}  // namespace

TEST_CASE("ding: annotations are stripped and positions aligned by ' | '", "[data]") {
  const DingEntry e = parse_ding_line(
      "Ablöse {f} /Abl./; Abstandszahlung {f} (Mietobjekt) <Ablösebetrag> | Ungesetzliche "
      "Ablösen können auf dem Klageweg zurückgefordert werden. :: key money [Br.]; premium (on a "
      "lease) | Unlawful premiums may be recovered by action.");
  CHECK(e.aligned);
  CHECK(e.sentences == Pairs{{"Ungesetzliche Ablösen können auf dem Klageweg zurückgefordert "
                              "werden.",
                              "Unlawful premiums may be recovered by action."}});
  CHECK(e.phrases == Pairs{{"Ablöse", "key money"}, {"Abstandszahlung", "premium"}});
}

TEST_CASE("ding: a semicolon inside brackets does not split synonyms", "[data]") {
  const DingEntry e = parse_ding_line(
      "Abneigung {f}; Antipathie {f} (gegen) | sofort eine Abneigung gegen etw. empfinden :: "
      "dislike (of; for) | to take an instant dislike to sth.");
  CHECK(e.sentences.empty());
  CHECK(e.phrases == Pairs{{"Abneigung", "dislike"},
                           {"Antipathie", "dislike"},
                           {"sofort eine Abneigung gegen etw. empfinden",
                            "to take an instant dislike to sth."}});
}

TEST_CASE("ding: synonyms pair round robin, apostrophes become ASCII", "[data]") {
  CHECK(parse_ding_line("Scher dich zum Teufel!; Fahr zur Hölle! :: Go to hell!").sentences ==
        Pairs{{"Scher dich zum Teufel!", "Go to hell!"}, {"Fahr zur Hölle!", "Go to hell!"}});
  CHECK(parse_ding_line("Zieh Leine!; Verzieh dich!; Hau ab! [ugs.] :: Get lost!; Beat it! "
                        "[coll.]")
            .sentences == Pairs{{"Zieh Leine!", "Get lost!"},
                                {"Verzieh dich!", "Beat it!"},
                                {"Hau ab!", "Get lost!"}});
  const DingEntry e = parse_ding_line(
      "Abmeldebestätigung {f} | Sie erhalten dann eine Abmeldebestätigung. :: confirmation of "
      "cancellation/departure | Then you’ll get the confirmation of your cancellation.");
  CHECK(e.sentences == Pairs{{"Sie erhalten dann eine Abmeldebestätigung.",
                              "Then you'll get the confirmation of your cancellation."}});
  CHECK(e.phrases == Pairs{{"Abmeldebestätigung", "confirmation of cancellation/departure"}});
  // Keeping typographic apostrophes is an option.
  CHECK(parse_ding_line("Ich bin’s. :: It’s me.", DingOptions().ascii_apostrophes(false))
            .sentences == Pairs{{"Ich bin’s.", "It’s me."}});
}

TEST_CASE("ding: slash alternatives, placeholders and non-sentences are not sentences", "[data]") {
  // Every German synonym has a slash alternative: the position gives phrases only.
  const DingEntry e = parse_ding_line("Ich vermisse dich/sie.; Du/Sie fehlst/fehlt mir. :: "
                                      "I miss you/her.");
  CHECK(e.sentences.empty());
  CHECK(e.phrases.size() == 2);
  CHECK(parse_ding_line("Er gab jdm. etw. :: He gave sb. sth.").sentences.empty());
  CHECK(parse_ding_line("Wir legen einen Kalender 2009/10 bei. :: We enclose a 2009/10 "
                        "calendar.")
            .sentences.size() == 1);  // digits around the slash are fine
  CHECK(is_sentence("Das ist gut."));
  CHECK(is_sentence("Ärger gibt es immer!"));
  CHECK(is_sentence("„Komm her!“"));
  CHECK(is_sentence("42 ist die Antwort?"));
  CHECK_FALSE(is_sentence("to take a break."));  // lower case start: an English phrase
  CHECK_FALSE(is_sentence("Abmeldebestätigung"));  // no final punctuation
  CHECK_FALSE(is_sentence("."));
}

TEST_CASE("ding: cleaning text", "[data]") {
  CHECK(clean_ding_text("Vor den Erfolg haben die Götter den Schweiß gesetzt. [Sprw.].") ==
        "Vor den Erfolg haben die Götter den Schweiß gesetzt.");
  CHECK(clean_ding_text("  Er  hatte (schon) {adv} Recht (damit) . ") == "Er hatte Recht.");
  CHECK(clean_ding_text("Hast du keine Lust mehr ?") == "Hast du keine Lust mehr?");
  CHECK(clean_ding_text("Und dann ... nichts.") == "Und dann ... nichts.");
  CHECK(clean_ding_text("Abk. {f} /Abk./") == "Abk.");
  CHECK(clean_ding_text("(a (nested) note) Text") == "Text");
  CHECK(clean_ding_text("[Br.]").empty());
}

TEST_CASE("ding: line structure", "[data]") {
  CHECK(parse_ding_line("# License :: GPL").sentences.empty());
  CHECK(parse_ding_line("").phrases.empty());
  const DingEntry m = parse_ding_line("eins | zwei :: one");
  CHECK_FALSE(m.aligned);
  CHECK(m.phrases.empty());
  CHECK_THROWS_WITH(parse_ding_line("just some text"), Contains("not a Ding entry"));
  // An empty English position stays aligned (a real line starts "... ::  | What a pity!").
  const DingEntry e = parse_ding_line("schade {adj} | Wie schade! ::  | What a pity!");
  CHECK(e.aligned);
  CHECK(e.sentences == Pairs{{"Wie schade!", "What a pity!"}});
}

TEST_CASE("ding: FNV-1a reference values", "[data]") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("ding: the hash split is deterministic and keeps sources together", "[data]") {
  Pairs pairs;
  for (int i = 0; i < 200; ++i)
    pairs.push_back({"Satz " + std::to_string(i) + ".", "Sentence " + std::to_string(i) + "."});
  pairs.push_back({"Satz 7.", "Clause 7."});  // a second translation of a source

  const Split a = split_by_hash(pairs, 20, 30);
  Pairs reversed(pairs.rbegin(), pairs.rend());
  const Split b = split_by_hash(reversed, 20, 30);

  auto sources = [](const Pairs& p) {
    std::set<std::string> s;
    for (const auto& x : p) s.insert(x.src);
    return s;
  };
  CHECK(sources(a.valid).size() == 20);
  CHECK(sources(a.test).size() == 30);
  CHECK(a.train.size() + a.valid.size() + a.test.size() == pairs.size());
  // Input order does not change which split a source lands in.
  CHECK(sources(a.valid) == sources(b.valid));
  CHECK(sources(a.test) == sources(b.test));
  CHECK(sources(a.train) == sources(b.train));
  // Disjoint sources; both translations of "Satz 7." are in one split.
  for (const auto& s : sources(a.valid)) CHECK(sources(a.train).count(s) == 0);
  for (const auto& s : sources(a.test)) CHECK(sources(a.train).count(s) == 0);
  for (const Pairs* split : {&a.train, &a.valid, &a.test}) {
    const auto n = std::count_if(split->begin(), split->end(),
                                 [](const SentencePair& p) { return p.src == "Satz 7."; });
    CHECK((n == 0 || n == 2));
  }
  // The ranks are by hash: the valid sources have the smallest hashes.
  uint64_t max_valid = 0, min_rest = UINT64_MAX;
  for (const auto& p : a.valid) max_valid = std::max(max_valid, fnv1a64(p.src));
  for (const auto& p : a.train) min_rest = std::min(min_rest, fnv1a64(p.src));
  for (const auto& p : a.test) min_rest = std::min(min_rest, fnv1a64(p.src));
  CHECK(max_valid < min_rest);
}

TEST_CASE("ding: deduplicate keeps the first of identical pairs", "[data]") {
  Pairs p = {{"a", "b"}, {"a", "c"}, {"a", "b"}, {"d", "e"}, {"d", "e"}};
  CHECK(deduplicate(p) == 2);
  CHECK(p == Pairs{{"a", "b"}, {"a", "c"}, {"d", "e"}});
}

TEST_CASE("ding: prepare_ding_corpus writes the splits and counts", "[data]") {
  rosetta::test::TempDir dir;
  const auto ding = dir.write("de-en", kSample);
  const auto out = dir.path() / "corpus";
  const auto opts = DingOptions().valid(1).test(1).phrases(true);
  const DingCounts c = prepare_ding_corpus(ding, out, opts);
  CHECK(c.lines == 8);
  CHECK(c.misaligned == 0);
  // Ablöse 1, Abmeldebestätigung 1, Teufel 2, Fleiß 2, Leine 3, Teufel again 2.
  CHECK(c.sentence_pairs == 11);
  CHECK(c.duplicates == 2);
  CHECK(c.valid + c.test + c.train + c.held_out_train == 9);
  CHECK(c.valid == 1);
  CHECK(c.test == 1);
  CHECK(c.phrases > 0);

  const Corpus train = read_tsv(out / "train.tsv");
  CHECK(train.pairs.size() == c.train);
  CHECK(read_tsv(out / "valid.tsv").pairs.size() == 1);
  CHECK(read_tsv(out / "phrases.tsv").pairs.size() == c.phrases);
  const auto fleiss = SentencePair{"Vor den Erfolg haben die Götter den Schweiß gesetzt.",
                                   "No cross, no crown."};
  const Pairs all = [&] {
    Pairs p = train.pairs;
    for (const char* f : {"valid.tsv", "test.tsv"})
      for (const auto& x : read_tsv(out / f).pairs) p.push_back(x);
    return p;
  }();
  CHECK(std::find(all.begin(), all.end(), fleiss) != all.end());

  // Idempotent: a second run writes the same bytes, and leaves no temporary files.
  const std::string first = dir.read("corpus/train.tsv");
  const DingCounts again = prepare_ding_corpus(ding, out, opts);
  CHECK(again.train == c.train);
  CHECK(dir.read("corpus/train.tsv") == first);
  CHECK_FALSE(std::filesystem::exists(out / "train.tsv.tmp"));
}

TEST_CASE("ding: no validation or test sentence occurs in a training file", "[data]") {
  // Two German sentences with one English translation: whichever lands in valid or test, the
  // training pair that shares its English side is removed; so are phrases equal to held-out text.
  Split split;
  split.valid = {{"Hau ab!", "Get lost!"}};
  split.test = {{"Topp!", "Done!"}};
  Pairs train = {{"Zieh Leine!", "Get lost!"}, {"Gut.", "Fine."}, {"Topp!", "Agreed!"}, {"Erledigt.", "Done!"}};
  CHECK(remove_held_out_text(split, train) == 3);
  CHECK(train == Pairs{{"Gut.", "Fine."}});

  // The whole pipeline, on the sample and with every split size: train.tsv and phrases.tsv share
  // no source or target text with valid.tsv and test.tsv.
  rosetta::test::TempDir dir;
  const auto ding = dir.write("de-en", kSample);
  for (size_t n = 1; n <= 3; ++n) {
    const auto out = dir.path() / ("corpus" + std::to_string(n));
    prepare_ding_corpus(ding, out, DingOptions().valid(n).test(n).phrases(true));
    std::set<std::string> held_out;
    for (const char* f : {"valid.tsv", "test.tsv"})
      for (const auto& p : read_tsv(out / f).pairs) held_out.insert({p.src, p.tgt});
    REQUIRE(held_out.size() >= 2);
    for (const char* f : {"train.tsv", "phrases.tsv"})
      for (const auto& p : read_tsv(out / f).pairs) {
        INFO(f << ": " << p.src << " ||| " << p.tgt);
        CHECK(held_out.count(p.src) == 0);
        CHECK(held_out.count(p.tgt) == 0);
      }
  }
}

TEST_CASE("ding: prepare_ding_corpus errors", "[data]") {
  rosetta::test::TempDir dir;
  CHECK_THROWS_WITH(prepare_ding_corpus(dir.path() / "missing", dir.path() / "o"),
                    Contains("missing: no such file"));
  const auto wrong = dir.write("wrong.txt", "# header\nHallo :: Hello\nthis is not ding\n");
  CHECK_THROWS_WITH(prepare_ding_corpus(wrong, dir.path() / "o"),
                    Contains("wrong.txt:3: not a Ding entry"));
  const auto bad_utf8 = dir.write("bad", "Hallo. :: Hello.\nTsch\xFC\xDF. :: Bye.\n");
  CHECK_THROWS_WITH(prepare_ding_corpus(bad_utf8, dir.path() / "o"),
                    Contains("bad:2: invalid UTF-8 at byte 5"));
  // Too few sentences for the requested valid + test sizes.
  const auto tiny = dir.write("tiny", "Ja. :: Yes.\nNein. :: No.\n");
  CHECK_THROWS_WITH(prepare_ding_corpus(tiny, dir.path() / "o", DingOptions().valid(1).test(1)),
                    Contains("none left for training"));
}

TEST_CASE("ding: the summary of prepare_ding_corpus names every count, phrases.tsv only when written", "[data]") {
  DingCounts c;
  c.lines = 9, c.misaligned = 1, c.sentence_pairs = 8, c.duplicates = 2;
  c.train = 4, c.valid = 1, c.test = 1, c.phrases = 7, c.held_out_train = 2, c.held_out_phrases = 3;
  const std::vector<std::string> with_phrases{
      "9 entries, 1 misaligned, 8 sentence pairs, 2 duplicates removed",
      "wrote out/train.tsv (4 pairs), valid.tsv (1), test.tsv (1)", "wrote out/phrases.tsv (7 pairs)",
      "removed 2 training pairs and 3 phrases whose source or target is a validation or test sentence"};
  CHECK(summary(c, DingOptions().phrases(true), "out") == with_phrases);
  std::vector<std::string> without = with_phrases;
  without.erase(without.begin() + 2);
  CHECK(summary(c, DingOptions(), "out") == without);
}
