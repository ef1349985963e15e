// Corpus readers: TSV and aligned files, every malformed-input case, length filters.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/tokenizer.h"
#include "temp_files.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using rosetta::test::TempDir;

TEST_CASE("corpus: TSV basics, trimming, and counts", "[data]") {
  TempDir d;
  const auto p = d.write("c.tsv",
                         "Hallo Welt.\tHello world.\n"
                         "  Guten Morgen.  \t Good morning. \n"
                         "Danke.\tThanks.");  // no final newline
  const Corpus c = read_tsv(p);
  REQUIRE(c.pairs.size() == 3);
  CHECK(c.pairs[0] == SentencePair{"Hallo Welt.", "Hello world."});
  CHECK(c.pairs[1] == SentencePair{"Guten Morgen.", "Good morning."});
  CHECK(c.pairs[2] == SentencePair{"Danke.", "Thanks."});
  CHECK(c.read == 3);
  CHECK(c.skipped_empty == 0);
  CHECK(c.filtered_long == 0);
}

TEST_CASE("corpus: CRLF line endings and a UTF-8 BOM are accepted", "[data]") {
  TempDir d;
  const auto p = d.write("crlf.tsv", "\xEF\xBB\xBFÄpfel.\tApples.\r\nBirnen.\tPears.\r\n");
  const Corpus c = read_tsv(p);
  REQUIRE(c.pairs.size() == 2);
  CHECK(c.pairs[0].src == "Äpfel.");  // BOM gone
  CHECK(c.pairs[0].tgt == "Apples.");  // '\r' gone
  CHECK(c.pairs[1].tgt == "Pears.");

  const auto de = d.write("a.de", "\xEF\xBB\xBF" "Eins.\r\nZwei.\r\n");
  const auto en = d.write("a.en", "\xEF\xBB\xBFOne.\r\nTwo.\r\n");
  const Corpus a = read_aligned(de, en);
  REQUIRE(a.pairs.size() == 2);
  CHECK(a.pairs[0] == SentencePair{"Eins.", "One."});
  CHECK(a.pairs[1] == SentencePair{"Zwei.", "Two."});
}

TEST_CASE("corpus: empty sides are skipped and counted", "[data]") {
  TempDir d;
  const auto p = d.write("e.tsv",
                         "Ja.\tYes.\n"
                         "\tNo source.\n"
                         "Kein Ziel.\t   \n"
                         "\n"
                         "   \n"
                         "Nein.\tNo.\n");
  const Corpus c = read_tsv(p);
  CHECK(c.read == 6);
  CHECK(c.skipped_empty == 4);
  REQUIRE(c.pairs.size() == 2);
  CHECK(c.pairs[1] == SentencePair{"Nein.", "No."});

  const auto de = d.write("e.de", "Eins.\n\nDrei.\n");
  const auto en = d.write("e.en", "One.\nTwo.\n \n");
  const Corpus a = read_aligned(de, en);
  CHECK(a.read == 3);
  CHECK(a.skipped_empty == 2);
  CHECK(a.pairs.size() == 1);
}

TEST_CASE("corpus: invalid UTF-8 names file, line and byte", "[data]") {
  TempDir d;
  // Line 3, byte 5: a lone continuation byte.
  const auto p = d.write("bad.tsv", "a\tb\nc\td\nabc\t\x80x\ny\tz\n");
  CHECK_THROWS_WITH(read_tsv(p), Contains("bad.tsv:3: invalid UTF-8 at byte 5"));
  // Overlong encoding of '/', a UTF-16 surrogate, a truncated sequence at end of line.
  CHECK_THROWS_WITH(read_tsv(d.write("o.tsv", "\xC0\xAF\tx\n")), Contains("o.tsv:1: invalid UTF-8 at byte 1"));
  CHECK_THROWS_WITH(read_tsv(d.write("s.tsv", "x\t\xED\xA0\x80\n")), Contains("s.tsv:1: invalid UTF-8 at byte 3"));
  CHECK_THROWS_WITH(read_tsv(d.write("t.tsv", "ok\tok\nx\tab\xE2\x82\n")), Contains("t.tsv:2: invalid UTF-8 at byte 5"));
  // Aligned files report the file that is wrong.
  const auto de = d.write("u.de", "gut\ngut\n");
  const auto en = d.write("u.en", "good\nbad \xFF\n");
  CHECK_THROWS_WITH(read_aligned(de, en), Contains("u.en:2: invalid UTF-8 at byte 5"));
  // Valid multi-byte text passes.
  CHECK(read_tsv(d.write("ok.tsv", "Größe 😀\t€ size\n")).pairs.size() == 1);
}

TEST_CASE("corpus: NUL bytes are rejected", "[data]") {
  TempDir d;
  const auto p = d.write("nul.tsv", std::string("a\tb\nab\0c\td\n", 11));
  CHECK_THROWS_WITH(read_tsv(p), Contains("nul.tsv:2: NUL byte at byte 3"));
}

TEST_CASE("corpus: a TSV line needs exactly one tab", "[data]") {
  TempDir d;
  CHECK_THROWS_WITH(read_tsv(d.write("n.tsv", "a\tb\nno tab here\n")),
                    Contains("n.tsv:2: no tab"));
  CHECK_THROWS_WITH(read_tsv(d.write("m.tsv", "a\tb\tc\n")),
                    Contains("m.tsv:1: more than one tab at byte 4"));
}

TEST_CASE("corpus: aligned files with different line counts", "[data]") {
  TempDir d;
  const auto de3 = d.write("x.de", "Eins.\nZwei.\nDrei.\n");
  const auto en2 = d.write("x.en", "One.\nTwo.\n");
  CHECK_THROWS_WITH(read_aligned(de3, en2),
                    Contains("x.de:3: no matching line in") && Contains("x.en, which has only 2"));
  CHECK_THROWS_WITH(read_aligned(en2, de3),
                    Contains("x.de:3: no matching line in") && Contains("x.en, which has only 2"));
  // A missing final newline is not a different count.
  const auto en3 = d.write("y.en", "One.\nTwo.\nThree.");
  CHECK(read_aligned(de3, en3).pairs.size() == 3);
}

TEST_CASE("corpus: missing file, directory, empty corpus", "[data]") {
  TempDir d;
  CHECK_THROWS_WITH(read_tsv(d.path() / "nope.tsv"), Contains("nope.tsv: no such file"));
  CHECK_THROWS_WITH(read_tsv(d.path()), Contains("is a directory, expected a file"));
  const auto en = d.write("z.en", "x\n");
  CHECK_THROWS_WITH(read_aligned(d.path() / "z.de", en), Contains("z.de: no such file"));
  CHECK_THROWS_WITH(read_tsv(d.write("empty.tsv", "")),
                    Contains("empty.tsv: no usable sentence pairs (0 read"));
  CHECK_THROWS_WITH(read_tsv(d.write("blank.tsv", "\n\t\n \t \n")),
                    Contains("no usable sentence pairs (3 read, 3 with an empty side"));
  // Everything filtered is empty too.
  CHECK_THROWS_WITH(read_tsv(d.write("long.tsv", "a b c\td\n"), ReadOptions().max_words(2)),
                    Contains("1 too long"));
}

TEST_CASE("corpus: the hard line limit", "[data]") {
  TempDir d;
  const std::string long_side(100, 'x');
  const auto p = d.write("l.tsv", "a\tb\n" + long_side + "\ty\n");
  CHECK_THROWS_WITH(read_tsv(p, ReadOptions().max_line_bytes(64)),
                    Contains("l.tsv:2: line longer than the limit of 64 bytes"));
  CHECK(read_tsv(p, ReadOptions().max_line_bytes(102)).pairs.size() == 2);  // exactly at limit
  CHECK_THROWS(read_tsv(p, ReadOptions().max_line_bytes(101)));
  // CRLF does not count against the limit.
  const auto q = d.write("crlf.tsv", long_side + "\ty\r\n");
  CHECK(read_tsv(q, ReadOptions().max_line_bytes(102)).pairs.size() == 1);
  // A line much longer than the read buffer, without any newline, is caught while reading.
  const auto big = d.write("big.tsv", std::string(300000, 'a'));
  CHECK_THROWS_WITH(read_tsv(big, ReadOptions().max_line_bytes(1000)),
                    Contains("big.tsv:1: line longer than"));
}

TEST_CASE("read_lines: lines of any text file, checked as the corpus readers check theirs", "[data]") {
  TempDir d;
  // A byte order mark and CRLF dropped; blank lines and tabs kept; no line after a final newline.
  CHECK(read_lines(d.write("t.txt", "\xEF\xBB\xBF" "a b\r\n\nc\td\n")) == std::vector<std::string>{"a b", "", "c\td"});
  CHECK(parse_lines("x\ny", "<stdin>") == std::vector<std::string>{"x", "y"});
  CHECK(parse_lines("", "<stdin>").empty());
  CHECK_THROWS_WITH(parse_lines("ok\n\xff\n", "<stdin>"), Contains("<stdin>:2: invalid UTF-8"));
  CHECK(read_lines(d.write("l.txt", "a\n" + std::string(65, 'x'))).size() == 2);  // the default limit is 1 MiB
  CHECK_THROWS_WITH(read_lines(d.write("l2.txt", "a\n" + std::string(65, 'x')), ReadOptions().max_line_bytes(64)),
                    Contains("l2.txt:2: line longer than the limit of 64 bytes"));
  CHECK_THROWS_WITH(read_lines(d.path() / "missing.txt"), Contains("missing.txt: no such file"));
}

TEST_CASE("corpus: length filters at read time count what they drop", "[data]") {
  TempDir d;
  const auto p = d.write("f.tsv",
                         "eins zwei\tone two\n"
                         "eins zwei drei vier\tone two\n"     // 4 source words
                         "eins\tone two three four five\n"  // 5 target words
                         "kurz\tshort\n");
  const Corpus words = read_tsv(p, ReadOptions().max_words(3));
  CHECK(words.read == 4);
  CHECK(words.filtered_long == 2);
  REQUIRE(words.pairs.size() == 2);
  CHECK(words.pairs[1].src == "kurz");

  const Corpus bytes = read_tsv(p, ReadOptions().max_bytes(9));  // "eins zwei" is 9 bytes
  CHECK(bytes.filtered_long == 2);
  CHECK(bytes.pairs.size() == 2);
  CHECK(bytes.read == bytes.pairs.size() + bytes.skipped_empty + bytes.filtered_long);

  CHECK(count_words("  a  b\tc ") == 3);
  CHECK(count_words("") == 0);
}

TEST_CASE("corpus: token-length filter keeps order and reports indices", "[data]") {
  std::vector<TokenPair> pairs = {
      {{4, 5}, {6}},           // kept
      {{4, 5, 6, 7}, {6}},     // source too long
      {{4}, {5, 6, 7, 8, 9}},  // target too long
      {{}, {5}},               // empty source
      {{9}, {9, 9}},           // kept
  };
  std::vector<size_t> kept;
  const size_t removed = filter_by_tokens(pairs, 3, 4, &kept);
  CHECK(removed == 3);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].src == std::vector<int32_t>{4, 5});
  CHECK(pairs[1].tgt == std::vector<int32_t>{9, 9});
  CHECK(kept == std::vector<size_t>{0, 4});
  // 0 = no limit: only the empty pair would go.
  std::vector<TokenPair> again = {{{1, 2, 3, 4, 5}, {1}}, {{1}, {}}};
  CHECK(filter_by_tokens(again, 0, 0) == 1);
}

TEST_CASE("corpus: write_tsv reads back, and refuses tabs", "[data]") {
  TempDir d;
  const std::vector<SentencePair> pairs = {{"Größe.", "Size."}, {"a b", "c d"}};
  write_tsv(d.path() / "w.tsv", pairs);
  CHECK(read_tsv(d.path() / "w.tsv").pairs == pairs);
  CHECK_THROWS_WITH(write_tsv(d.path() / "x.tsv", {{"a\tb", "c"}}), Contains("tab or line break"));
}

TEST_CASE("corpus: tokenize encodes each side with its tokenizer", "[data]") {
  std::vector<std::string> text;
  for (int i = 0; i < 50; ++i) text.push_back("der Hund und die Katze " + std::to_string(i % 10));
  const Tokenizer tok = Tokenizer::train(text, TokenizerOptions().vocab_size(40));
  const std::vector<SentencePair> pairs = {{"der Hund", "die Katze 1"}};
  const std::vector<TokenPair> t = tokenize(pairs, tok, tok);
  REQUIRE(t.size() == 1);
  CHECK(t[0].src == tok.encode("der Hund"));
  CHECK(tok.decode(t[0].tgt) == "die Katze 1");
}
