// The messages corpus: the pair filter, the split by English msgid, and the pipeline on small
// catalogs written by the test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "mo_bytes.h"
#include "rosetta/core/check.h"
#include "rosetta/data/messages.h"
#include "temp_files.h"

using namespace rosetta::data;
using rosetta::test::header_with;
using rosetta::test::kUtf8Header;
using rosetta::test::mo_bytes;
using Catch::Matchers::Contains;
using Pairs = std::vector<SentencePair>;
using Entries = std::vector<std::pair<std::string, std::string>>;

namespace {

MoEntry entry(std::string msgid, std::vector<std::string> msgstr, std::string plural = "") {
  MoEntry e;
  e.msgid = std::move(msgid);
  e.msgid_plural = std::move(plural);
  e.msgstr = std::move(msgstr);
  return e;
}

MessageVerdict verdict(const MoEntry& e, SentencePair* out = nullptr,
                       const MessagesOptions& o = {}) {
  SentencePair p;
  const MessageVerdict v = message_pair(e, o, p);
  if (out) *out = p;
  return v;
}

std::set<std::string> targets(const Pairs& pairs) {
  std::set<std::string> s;
  for (const auto& p : pairs) s.insert(p.tgt);
  return s;
}

}  // namespace

TEST_CASE("messages: normalising a message", "[data]") {
  CHECK(normalize_message("  Datei\t nicht   gefunden\n") == "Datei nicht gefunden");
  CHECK(normalize_message("%s: cannot open\n\n") == "%s: cannot open");
  CHECK(normalize_message("Usage: %s\nOptions:") == "");  // a line break inside
  CHECK(normalize_message("bell\a") == "");                // a control character
  CHECK(normalize_message("It’s ‘here’") == "It's 'here'");
  CHECK(normalize_message("It’s", false) == "It’s");
  CHECK(count_code_points("Größe") == 5);
  CHECK(count_code_points("") == 0);
}

TEST_CASE("messages: which entries give a pair", "[data]") {
  SentencePair p;
  CHECK(verdict(entry("File not found\n", {"Datei nicht gefunden\n"}), &p) == MessageVerdict::kKept);
  CHECK(p == SentencePair{"Datei nicht gefunden", "File not found"});  // German -> English
  // A plural entry gives its singular pair.
  CHECK(verdict(entry("%d file", {"%d Datei", "%d Dateien"}, "%d files"), &p) ==
        MessageVerdict::kKept);
  CHECK(p == SentencePair{"%d Datei", "%d file"});
  // A tab inside becomes a space: the TSV stays two columns.
  CHECK(verdict(entry("Name:\tvalue", {"Name:\tWert"}), &p) == MessageVerdict::kKept);
  CHECK(p == SentencePair{"Name: Wert", "Name: value"});

  CHECK(verdict(entry("Open", {})) == MessageVerdict::kUntranslated);
  CHECK(verdict(entry("Open", {""})) == MessageVerdict::kUntranslated);
  CHECK(verdict(entry("%d file", {"", "%d Dateien"}, "%d files")) == MessageVerdict::kUntranslated);
  CHECK(verdict(entry("Usage: %s\n  -h  help\n", {"Aufruf: %s\n  -h  Hilfe\n"})) ==
        MessageVerdict::kNotOneLine);
  CHECK(verdict(entry("y", {"j"})) == MessageVerdict::kTooShort);
  CHECK(verdict(entry("Yes", {"J"})) == MessageVerdict::kTooShort);
  CHECK(verdict(entry("OK", {"OK"})) == MessageVerdict::kSame);
  CHECK(verdict(entry("%s: %s", {"%s: %s"})) == MessageVerdict::kSame);
  CHECK(verdict(entry(" GNU ", {"GNU"})) == MessageVerdict::kSame);  // equal once normalised
  const std::string long_en(201, 'a');
  CHECK(verdict(entry(long_en, {"kurz"})) == MessageVerdict::kTooLong);
  // 200 code points (400 bytes) is not too long; the limits are options.
  std::string umlauts;
  for (int i = 0; i < 200; ++i) umlauts += "ä";
  CHECK(verdict(entry("long", {umlauts})) == MessageVerdict::kKept);
  CHECK(verdict(entry("long", {umlauts}), nullptr, MessagesOptions().max_chars(199)) ==
        MessageVerdict::kTooLong);
  CHECK(verdict(entry("Yes", {"J"}), nullptr, MessagesOptions().min_chars(1)) ==
        MessageVerdict::kKept);
}

TEST_CASE("messages: the split is by English msgid and deterministic", "[data]") {
  Pairs pairs;
  for (int i = 0; i < 300; ++i)
    pairs.push_back({"Meldung " + std::to_string(i), "Message " + std::to_string(i)});
  // One msgid translated two ways (two packages): both pairs land in the same split.
  pairs.push_back({"Nachricht 7", "Message 7"});

  MessagesCounts c;
  const auto o = MessagesOptions().valid(20).test(30);
  const Split a = split_messages(pairs, o, c);
  const Pairs reversed(pairs.rbegin(), pairs.rend());
  MessagesCounts c2;
  const Split b = split_messages(reversed, o, c2);

  CHECK(targets(a.valid).size() == 20);
  CHECK(targets(a.test).size() == 30);
  CHECK(c.valid == a.valid.size());
  CHECK(c.held_out_train == 0);
  CHECK(a.train.size() + a.valid.size() + a.test.size() == pairs.size());
  CHECK(targets(a.valid) == targets(b.valid));
  CHECK(targets(a.test) == targets(b.test));
  CHECK(targets(a.train) == targets(b.train));
  for (const Pairs* part : {&a.train, &a.valid, &a.test}) {
    const auto n = std::count_if(part->begin(), part->end(),
                                 [](const SentencePair& p) { return p.tgt == "Message 7"; });
    CHECK((n == 0 || n == 2));
    for (const auto& p : *part) CHECK(p.src.rfind("Message", 0) == std::string::npos);  // swapped back
  }
  // The valid msgids have the smallest hashes.
  uint64_t max_valid = 0, min_rest = UINT64_MAX;
  for (const auto& p : a.valid) max_valid = std::max(max_valid, fnv1a64(p.tgt));
  for (const Pairs* part : {&a.train, &a.test})
    for (const auto& p : *part) min_rest = std::min(min_rest, fnv1a64(p.tgt));
  CHECK(max_valid < min_rest);

  // A German text shared by a held-out msgid and a training msgid leaves train. (The new msgid
  // is one that ranks after every held-out one, so the held-out sets stay as they were.)
  uint64_t max_held_out = max_valid;
  for (const auto& p : a.test) max_held_out = std::max(max_held_out, fnv1a64(p.tgt));
  std::string other = "Another message";
  while (fnv1a64(other) < max_held_out) other += "!";
  const std::string held_de = a.valid.front().src;
  Pairs with_shared = pairs;
  with_shared.push_back({held_de, other});
  MessagesCounts c3;
  const Split s = split_messages(with_shared, o, c3);
  CHECK(targets(s.valid) == targets(a.valid));
  CHECK(c3.held_out_train == 1);
  for (const auto& p : s.train) CHECK(p.src != held_de);
}

TEST_CASE("messages: prepare_messages_corpus on a directory of catalogs", "[data]") {
  rosetta::test::TempDir dir;
  const auto locale = dir.path() / "LC_MESSAGES";
  std::filesystem::create_directories(locale);
  Entries a = {{"", kUtf8Header}, {"Cannot open %s\n", "Kann %s nicht öffnen\n"},
               {"File not found", "Datei nicht gefunden"}, {"OK", "OK"},
               {"Usage: %s\nMore", "Aufruf: %s\nMehr"}, {"menu\x04Quit", "Beenden"}};
  for (int i = 0; i < 8; ++i)
    a.push_back({"Error number " + std::to_string(i), "Fehler Nummer " + std::to_string(i)});
  a.push_back({std::string("%d line\0%d lines", 16), std::string("%d Zeile\0%d Zeilen", 19)});
  // The second package repeats a pair of the first, and translates one msgid differently.
  const Entries b = {{"", header_with("ISO-8859-1")}, {"File not found", "Datei nicht gefunden"},
                     {"Quit", "Verlassen"}, {"Size", "Gr\xF6\xDF" "e"}};
  const Entries ru = {{"", header_with("KOI8-R")}, {"File", "\xE6\xC1\xCA\xCC"}};
  dir.write("LC_MESSAGES/a.mo", mo_bytes(a));
  dir.write("LC_MESSAGES/b.mo", mo_bytes(b, true));
  dir.write("LC_MESSAGES/c.mo", mo_bytes(ru));
  dir.write("LC_MESSAGES/README", "not a catalog");

  const auto out = dir.path() / "corpus";
  const auto o = MessagesOptions().valid(2).test(2);
  const MessagesCounts c = prepare_messages_corpus({locale}, out, o);
  CHECK(c.catalogs == 2);
  REQUIRE(c.skipped.size() == 1);
  CHECK_THAT(c.skipped[0].first, Contains("c.mo"));
  CHECK_THAT(c.skipped[0].second, Contains("KOI8-R"));
  CHECK(c.entries == 14 + 3);
  CHECK(c.plurals == 1);
  CHECK(c.same == 1);
  CHECK(c.not_one_line == 1);
  CHECK(c.pairs == 12 + 3);
  CHECK(c.duplicates == 1);
  CHECK(c.catalog_pairs.size() == 2);
  CHECK(c.valid + c.test + c.train + c.held_out_train == 14);

  Pairs all;
  for (const char* f : {"train.tsv", "valid.tsv", "test.tsv"})
    for (const auto& p : read_tsv(out / f).pairs) all.push_back(p);
  CHECK(read_tsv(out / "valid.tsv").pairs.size() == c.valid);
  for (const SentencePair& want : {SentencePair{"Kann %s nicht öffnen", "Cannot open %s"},
                                   SentencePair{"Beenden", "Quit"}, SentencePair{"Verlassen", "Quit"},
                                   SentencePair{"Größe", "Size"}, SentencePair{"%d Zeile", "%d line"}})
    CHECK(std::count(all.begin(), all.end(), want) == 1);

  // Idempotent, and the same corpus from the files named one by one in the same order.
  const std::string first = dir.read("corpus/train.tsv");
  prepare_messages_corpus({locale}, out, o);
  CHECK(dir.read("corpus/train.tsv") == first);
  prepare_messages_corpus({locale / "a.mo", locale / "b.mo", locale / "c.mo"}, dir.path() / "two", o);
  CHECK(dir.read("two/train.tsv") == first);
  CHECK_FALSE(std::filesystem::exists(out / "train.tsv.tmp"));
}

TEST_CASE("messages: errors name the input", "[data]") {
  rosetta::test::TempDir dir;
  CHECK_THROWS_WITH(find_mo_files({dir.path() / "nope"}), Contains("nope: no such file or directory"));
  CHECK_THROWS_WITH(find_mo_files({dir.path()}), Contains(": no .mo files in this directory"));
  // A broken catalog among good ones stops the run, naming it.
  dir.write("good.mo", mo_bytes({{"", kUtf8Header}, {"Hello", "Hallo"}}));
  dir.write("broken.mo", mo_bytes({{"", kUtf8Header}, {"Hello", "Hallo"}}).substr(0, 40));
  CHECK_THROWS_WITH(prepare_messages_corpus({dir.path()}, dir.path() / "o"),
                    Contains("broken.mo: ") && Contains("runs past the end of the file"));
  std::filesystem::remove(dir.path() / "broken.mo");
  // Too few msgids for the held-out sets.
  CHECK_THROWS_WITH(prepare_messages_corpus({dir.path()}, dir.path() / "o"),
                    Contains("none left for training"));
  // Only catalogs in an unsupported charset.
  rosetta::test::TempDir ru;
  ru.write("ru.mo", mo_bytes({{"", header_with("KOI8-R")}, {"File", "x"}}));
  CHECK_THROWS_WITH(prepare_messages_corpus({ru.path()}, ru.path() / "o"),
                    Contains("none of the 1 catalogs could be read") && Contains("KOI8-R"));
}

TEST_CASE("messages: the summary of prepare_messages_corpus names every count and the length limits", "[data]") {
  MessagesCounts c;
  c.catalogs = 3, c.skipped = {{"a.mo", "charset"}}, c.entries = 50, c.plurals = 4;
  c.untranslated = 5, c.not_one_line = 6, c.too_short = 7, c.too_long = 8, c.same = 9;
  c.pairs = 15, c.duplicates = 2, c.train = 9, c.valid = 2, c.test = 2, c.held_out_train = 1;
  CHECK(summary(c, MessagesOptions().min_chars(3).max_chars(120), "out") ==
        std::vector<std::string>{
            "3 catalogs read, 1 skipped; 50 entries (4 plural, singular taken)",
            "dropped: 5 untranslated, 6 multi-line, 7 shorter than 3 characters, 8 longer than 120, 9 identical on "
            "both sides",
            "15 pairs, 2 duplicates removed", "wrote out/train.tsv (9 pairs), valid.tsv (2), test.tsv (2)",
            "removed 1 training pairs whose German or English side is a validation or test text"});
}
