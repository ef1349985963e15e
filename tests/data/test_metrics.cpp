// Corpus BLEU / chrF against sacreBLEU 2.x.
//
// sacreBLEU is not packaged in Debian 12, so the expected values come from two places:
//   1. Published sacreBLEU outputs: its own test-suite (test/test_bleu.py, test_chrf.py,
//      test_sentence_bleu.py), its README, and the Hugging Face `evaluate` docs/tests that wrap
//      sacreBLEU. Each case names its source; the tolerance is the one the source's precision
//      allows.
//   2. Small cases derived by hand below: the n-gram counts are written out in comments and
//      checked exactly, then the score is recomputed from them with sacreBLEU's formula.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/data/metrics.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using Strings = std::vector<std::string>;
using Counts = std::array<int64_t, 4>;

namespace {

// sacreBLEU's formula on already smoothed precisions (percent): BP * exp(mean log p).
double bleu_formula(double bp, double p1, double p2, double p3, double p4) {
  return bp * std::exp((std::log(p1) + std::log(p2) + std::log(p3) + std::log(p4)) / 4);
}

// F_beta of averaged precision P and recall R, in percent.
double f_beta(double p, double r, double beta) {
  const double b2 = beta * beta;
  return 100 * (1 + b2) * p * r / (b2 * p + r);
}

}  // namespace

// ================================================================ tokenizer 13a

TEST_CASE("tokenize_13a pads punctuation as mteval-v13a does", "[data][metrics]") {
  CHECK(tokenize_13a("Hello, world!") == Strings{"Hello", ",", "world", "!"});
  // ' and - are not padded; - only after a digit.
  CHECK(tokenize_13a("It's a well-known fact") == Strings{"It's", "a", "well-known", "fact"});
  CHECK(tokenize_13a("1990-1995 and a-5") == Strings{"1990", "-", "1995", "and", "a-5"});
  // . and , stay inside numbers; split elsewhere.
  CHECK(tokenize_13a("$1,000.50 (approx.)") ==
        Strings{"$", "1,000.50", "(", "approx", ".", ")"});
  // The line is padded with spaces first, so a final "5." still splits ("." then " ").
  CHECK(tokenize_13a("costs 5.") == Strings{"costs", "5", "."});
  CHECK(tokenize_13a("x.y a..b") == Strings{"x", ".", "y", "a", ".", ".", "b"});
  CHECK(tokenize_13a("a/b@c #1 50%") ==
        Strings{"a", "/", "b", "@", "c", "#", "1", "50", "%"});
  CHECK(tokenize_13a("").empty());
  CHECK(tokenize_13a("  \t ").empty());
}

TEST_CASE("tokenize_13a un-escapes entities, joins hyphenated breaks, drops <skipped>",
          "[data][metrics]") {
  CHECK(tokenize_13a("&quot;Hi&quot; &amp; &lt;b&gt;") ==
        Strings{"\"", "Hi", "\"", "&", "<", "b", ">"});
  // Replacements run one after the other: &amp;lt; -> &lt; -> <.
  CHECK(tokenize_13a("&amp;lt;") == Strings{"<"});
  CHECK(tokenize_13a("<skipped> a") == Strings{"a"});
  CHECK(tokenize_13a("line-\nbreak two\nlines") == Strings{"linebreak", "two", "lines"});
}

TEST_CASE("tokenize_13a works on code points and splits on Unicode whitespace",
          "[data][metrics]") {
  CHECK(tokenize_13a("Straße, Grüße.") == Strings{"Straße", ",", "Grüße", "."});
  // U+00A0 (no-break space) and U+3000 are whitespace for Python's str.split(); U+200B is not.
  CHECK(tokenize_13a("a\u00A0b\u3000c") == Strings{"a", "b", "c"});
  CHECK(tokenize_13a("a\u200Bb") == Strings{"a\u200Bb"});
  // Every code point Python's str.split() splits on, and a few look-alikes it does not.
  for (const char* ws : {"\t", "\n", "\v", "\f", "\r", "\x1C", "\x1D", "\x1E", "\x1F", " ",
                         "\u0085", "\u00A0", "\u1680", "\u2000", "\u2005", "\u200A", "\u2028",
                         "\u2029", "\u202F", "\u205F", "\u3000"}) {
    INFO("whitespace " << ws);
    CHECK(tokenize_13a(std::string("x") + ws + "y") == Strings{"x", "y"});
  }
  for (const char* other : {"\u180E", "\u200B", "\u2060", "\uFEFF"})
    CHECK(tokenize_13a(std::string("x") + other + "y").size() == 1);
  REQUIRE_THROWS_AS(tokenize_13a("bad \xC3("), rosetta::Error);
  REQUIRE_THROWS_AS(tokenize_13a("overlong \xC0\xAF"), rosetta::Error);
  REQUIRE_THROWS_AS(tokenize_13a("surrogate \xED\xA0\x80"), rosetta::Error);
}

// ================================================================ BLEU: published values

TEST_CASE("corpus BLEU equals sacreBLEU's README / test_bleu.py example (2 references)",
          "[data][metrics]") {
  // sacreBLEU test/test_bleu.py: score 48.530827 (asserted there within 1e-8); README:
  // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
  const Strings hyps = {"The dog bit the man.", "It wasn't surprising.",
                        "The man had just bitten him."};
  const std::vector<Strings> refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
      {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
  const BleuScore b = corpus_bleu_multi(hyps, refs);
  CHECK_THAT(b.score, WithinAbs(48.530827, 1e-8));
  CHECK(b.str() ==
        "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  // By hand: sentence 1 matches reference 1 exactly (6/5/4/3 n-grams); sentence 2 matches
  // "It" and "." only (2/4, 0/3, 0/2, 0/1); sentence 3 "The man had just bitten him ." matches
  // The man had bitten him . (6/7), "The man" "man had" (2/6), "The man had" (1/5), 0/4.
  // Closest reference lengths 6, 5 (hyp 4), 7.
  CHECK(b.counts == Counts{14, 7, 5, 3});
  CHECK(b.totals == Counts{17, 14, 11, 8});
  CHECK(b.hyp_len == 17);
  CHECK(b.ref_len == 18);

  // test_bleu.py: empty hypotheses are kept and score 0.
  const BleuScore e = corpus_bleu_multi({"", "", ""}, refs);
  CHECK(e.score == 0.0);
  CHECK(e.bp == 0.0);
  CHECK(e.ref_len == 17);  // closest to length 0: 6, 5, 6
}

TEST_CASE("corpus BLEU equals the Hugging Face evaluate 'sacrebleu' doc example",
          "[data][metrics]") {
  // evaluate/metrics/sacrebleu README: {'score': 39.76353643835252, 'counts': [6, 4, 2, 1],
  // 'totals': [10, 8, 6, 4], 'precisions': [60.0, 50.0, 33.333333333333336, 25.0], 'bp': 1.0,
  // 'sys_len': 10, 'ref_len': 7}
  const BleuScore b = corpus_bleu_multi(
      {"hello there general kenobi", "on our way to ankh morpork"},
      {{"hello there general kenobi", "goodbye ankh morpork"}, {"hello there !", "ankh morpork"}});
  CHECK_THAT(b.score, WithinAbs(39.76353643835252, 1e-12));
  CHECK(b.counts == Counts{6, 4, 2, 1});
  CHECK(b.totals == Counts{10, 8, 6, 4});
  CHECK_THAT(b.precisions[2], WithinAbs(33.333333333333336, 1e-12));
  CHECK(b.bp == 1.0);
  CHECK(b.hyp_len == 10);
  CHECK(b.ref_len == 7);
}

TEST_CASE("corpus BLEU matches sacreBLEU's test_bleu.py statistics and degenerate cases",
          "[data][metrics]") {
  // test_case_statistics: counts [4, 2, 1, 0], totals [6, 5, 4, 3].
  const BleuScore s = corpus_bleu({"am I am a character sequence"},
                                  {"I am a symbol string sequence a a"});
  CHECK(s.counts == Counts{4, 2, 1, 0});
  CHECK(s.totals == Counts{6, 5, 4, 3});
  // With 'exp' smoothing p4 = 100 / (2 * 3); hyp 6 < ref 8 -> BP = exp(1 - 8/6).
  const double bp = std::exp(1.0 - 8.0 / 6.0);
  CHECK_THAT(s.bp, WithinAbs(bp, 1e-15));
  CHECK_THAT(s.precisions[3], WithinAbs(100.0 / 6.0, 1e-12));
  CHECK_THAT(s.score,
             WithinAbs(bleu_formula(bp, 400.0 / 6, 200.0 / 5, 100.0 / 4, 100.0 / 6), 1e-9));

  // test_raw_bleu_cases: no match at all -> 0 (sacreBLEU #141); identical -> 100.
  CHECK(corpus_bleu({"this is a test", "another test"}, {"ref1", "ref2"}).score == 0.0);
  CHECK_THAT(corpus_bleu({"this is a test"}, {"this is a test"}).score, WithinAbs(100.0, 1e-12));

  // test_case_scoring: compute_bleu([9,7,5,3], [10,8,6,4], 11, 11) = 0.8375922397 (x100).
  BleuStats st;
  st.correct = {9, 7, 5, 3};
  st.total = {10, 8, 6, 4};
  st.hyp_len = st.ref_len = 11;
  CHECK_THAT(bleu_from_stats(st).score, WithinAbs(83.75922397, 1e-8));
}

TEST_CASE("corpus BLEU: Romanian example of sacreBLEU's test_sentence_bleu.py",
          "[data][metrics]") {
  // Published 8.493 (within 1e-3, effective order on; it changes nothing here since every order
  // has hypothesis n-grams). By hand, 13a tokens: hyp 14 "Producția de zahăr primă va fi
  // exprimată în ceea ce privește zahărul alb ;", ref 10 "producţia de zahăr brut se exprimă
  // în zahăr alb ;" (ţ U+0163 vs ț U+021B, and P vs p, differ).
  // 1-grams: de zahăr în alb ; = 5/14; 2-grams: "de zahăr" "alb ;" = 2/13; 3: 0/12; 4: 0/11.
  // p3 = 100/(2*12), p4 = 100/(4*11); hyp longer -> BP 1.
  const BleuScore b =
      corpus_bleu({"Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"},
                  {"producţia de zahăr brut se exprimă în zahăr alb;"});
  CHECK(b.counts == Counts{5, 2, 0, 0});
  CHECK(b.totals == Counts{14, 13, 12, 11});
  CHECK_THAT(b.score, WithinAbs(8.493, 1e-3));
  CHECK_THAT(b.score,
             WithinAbs(bleu_formula(1.0, 500.0 / 14, 200.0 / 13, 100.0 / 24, 100.0 / 44), 1e-9));
}

// ================================================================ BLEU: derived by hand

TEST_CASE("corpus BLEU: identical corpus is 100", "[data][metrics]") {
  const BleuScore b = corpus_bleu({"the cat sat on the mat", "Guten Morgen , Welt !"},
                                  {"the cat sat on the mat", "Guten Morgen, Welt!"});
  CHECK_THAT(b.score, WithinAbs(100.0, 1e-12));
  CHECK(b.bp == 1.0);
  CHECK(b.ratio == 1.0);
  CHECK(b.counts == b.totals);
  CHECK(b.totals == Counts{11, 9, 7, 5});
}

TEST_CASE("corpus BLEU: empty hypothesis gives 0 with BP 0", "[data][metrics]") {
  const BleuScore b = corpus_bleu({""}, {"a b c"});
  CHECK(b.score == 0.0);
  CHECK(b.bp == 0.0);
  CHECK(b.ratio == 0.0);
  CHECK(b.hyp_len == 0);
  CHECK(b.ref_len == 3);
  CHECK(b.str() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 3)");
}

TEST_CASE("corpus BLEU: exp smoothing of orders without matches", "[data][metrics]") {
  // "this is a fest" vs "this is a test": 3/4, 2/3, 1/2, 0/1 -> p4 = 100 / (2 * 1) = 50.
  const BleuScore one = corpus_bleu({"this is a fest"}, {"this is a test"});
  CHECK(one.counts == Counts{3, 2, 1, 0});
  CHECK_THAT(one.precisions[3], WithinAbs(50.0, 1e-12));
  CHECK_THAT(one.score, WithinAbs(bleu_formula(1.0, 75.0, 200.0 / 3, 50.0, 50.0), 1e-9));
  CHECK_THAT(one.score, WithinAbs(100 * std::pow(0.125, 0.25), 1e-9));  // 59.46...

  // Two orders without matches: hyp "a b z c d" vs ref "a b c d".
  // 1: a b c d = 4/5; 2: "a b" "c d" = 2/4; 3: 0/3 -> 100/(2*3); 4: 0/2 -> 100/(4*2).
  const BleuScore two = corpus_bleu({"a b z c d"}, {"a b c d"});
  CHECK(two.counts == Counts{4, 2, 0, 0});
  CHECK(two.totals == Counts{5, 4, 3, 2});
  CHECK_THAT(two.precisions[2], WithinAbs(100.0 / 6, 1e-12));
  CHECK_THAT(two.precisions[3], WithinAbs(12.5, 1e-12));
  CHECK_THAT(two.score, WithinAbs(bleu_formula(1.0, 80.0, 50.0, 100.0 / 6, 12.5), 1e-9));
}

TEST_CASE("corpus BLEU: a corpus without 4-grams scores 0 (no effective order)",
          "[data][metrics]") {
  // "a b c" vs "a b d": 2/3, 1/2, 0/1, and no 4-gram at all: sacreBLEU's log(0) -> score 0.
  const BleuScore b = corpus_bleu({"a b c"}, {"a b d"});
  CHECK(b.counts == Counts{2, 1, 0, 0});
  CHECK(b.totals == Counts{3, 2, 1, 0});
  CHECK(b.score == 0.0);
  CHECK_THAT(b.precisions[2], WithinAbs(50.0, 1e-12));  // 100 / (2 * 1)
  CHECK(b.precisions[3] == 0.0);
}

TEST_CASE("corpus BLEU: statistics add up over sentences before the brevity penalty",
          "[data][metrics]") {
  // Sentence 1: "the cat sat" vs "the cat sat down": 3/3, 2/2, 1/1, 0/0; lengths 3 vs 4.
  // Sentence 2: "on the mat today" vs "on the red mat today .": on the mat today = 4/4;
  //   "on the" "mat today" = 2/3; 0/2; 0/1; lengths 4 vs 6.
  // Corpus: 7/7, 4/5, 1/3, 0/1 -> p4 = 100/(2*1); hyp 7 < ref 10 -> BP = exp(1 - 10/7).
  const Strings hyps = {"the cat sat", "on the mat today"};
  const Strings refs = {"the cat sat down", "on the red mat today ."};
  const BleuScore b = corpus_bleu(hyps, refs);
  CHECK(b.counts == Counts{7, 4, 1, 0});
  CHECK(b.totals == Counts{7, 5, 3, 1});
  CHECK(b.hyp_len == 7);
  CHECK(b.ref_len == 10);
  const double bp = std::exp(1.0 - 10.0 / 7.0);
  CHECK_THAT(b.bp, WithinAbs(bp, 1e-15));
  CHECK_THAT(b.ratio, WithinAbs(0.7, 1e-15));
  CHECK_THAT(b.score, WithinAbs(bleu_formula(bp, 100.0, 80.0, 100.0 / 3, 50.0), 1e-9));

  // The same through the two halves of the API.
  BleuStats sum = bleu_stats(hyps[0], {refs[0]});
  sum += bleu_stats(hyps[1], {refs[1]});
  CHECK(bleu_from_stats(sum).score == b.score);
}

TEST_CASE("corpus BLEU: 13a punctuation, numbers, hyphens and entities", "[data][metrics]") {
  // hyp tokens: The price , &quot; 1,000.50 &quot; , is well-known ( 1990 - 1995 ) .
  //   = The price , " 1,000.50 " , is well-known ( 1990 - 1995 ) .       (15 tokens)
  // ref tokens: The price , " 1,000.50 " , was well-known ( 1990 - 1995 ) .
  // Only "is"/"was" differ (position 8 of 15): 1-grams 14/15, 2-grams 12/14 (the two around
  // it are lost), 3-grams 10/13, 4-grams 8/12.
  const BleuScore b =
      corpus_bleu({"The price, &quot;1,000.50&quot;, is well-known (1990-1995)."},
                  {"The price, \"1,000.50\", was well-known (1990-1995)."});
  CHECK(b.totals == Counts{15, 14, 13, 12});
  CHECK(b.counts == Counts{14, 12, 10, 8});
  CHECK_THAT(b.score,
             WithinAbs(bleu_formula(1.0, 1400.0 / 15, 1200.0 / 14, 1000.0 / 13, 800.0 / 12), 1e-9));
}

TEST_CASE("corpus BLEU: German with umlauts and ß, case-sensitive", "[data][metrics]") {
  // hyp "Die Straße ist schön ." (5), ref "Die Straße ist nicht schön ." (6):
  // 1: 5/5; 2: "Die Straße" "Straße ist" "schön ." = 3/4; 3: "Die Straße ist" = 1/3;
  // 4: 0/2 -> 100/(2*2); BP = exp(1 - 6/5).
  const BleuScore b = corpus_bleu({"Die Straße ist schön."}, {"Die Straße ist nicht schön."});
  CHECK(b.counts == Counts{5, 3, 1, 0});
  CHECK(b.totals == Counts{5, 4, 3, 2});
  const double bp = std::exp(1.0 - 6.0 / 5.0);
  CHECK_THAT(b.score, WithinAbs(bleu_formula(bp, 100.0, 75.0, 100.0 / 3, 25.0), 1e-9));

  // Case matters: nothing matches.
  CHECK(corpus_bleu({"die straße"}, {"Die Straße"}).score == 0.0);
  // Trailing whitespace is stripped before tokenizing (sacreBLEU's rstrip), so a final "-\n"
  // stays a "-" token instead of being joined away as a hyphenated line break.
  CHECK_THAT(corpus_bleu({"Grüße aus der Stadt Köln -\n"}, {"Grüße aus der Stadt Köln -"}).score,
             WithinAbs(100.0, 1e-12));
}

TEST_CASE("corpus BLEU: reference length is the closest one, shorter on ties",
          "[data][metrics]") {
  // hyp 3 tokens; references of 2 and 4 tokens are equally close -> 2.
  const BleuScore b = corpus_bleu_multi({"a b c"}, {{"a b c d"}, {"a b"}});
  CHECK(b.ref_len == 2);
  // Empty references are skipped when others exist (sacreBLEU's variable reference count).
  CHECK(corpus_bleu_multi({"a b c"}, {{""}, {"a b c d e"}}).ref_len == 5);
}

TEST_CASE("corpus BLEU rejects bad input", "[data][metrics]") {
  REQUIRE_THROWS_WITH(corpus_bleu({"a", "b", "c"}, {"a", "b"}),
                      Contains("3 hypotheses") && Contains("2 references"));
  REQUIRE_THROWS_AS(corpus_bleu({}, {}), rosetta::Error);
  REQUIRE_THROWS_WITH(corpus_bleu({"a", "b"}, {"a", ""}), Contains("reference 1"));
  REQUIRE_THROWS_AS(corpus_bleu_multi({"a"}, {{""}, {""}}), rosetta::Error);
  REQUIRE_THROWS_WITH(corpus_bleu_multi({"a", "b"}, {{"a", "b"}, {"a"}}),
                      Contains("2 hypotheses") && Contains("1 references"));
  REQUIRE_THROWS_WITH(corpus_bleu({"ok", "bad \xFF"}, {"ok", "fine"}), Contains("hypothesis 1"));
}

// ================================================================ chrF: published values

TEST_CASE("corpus chrF equals the Hugging Face evaluate 'chrf' example (defaults)",
          "[data][metrics]") {
  // evaluate/metrics/chrf README, asserted with == in h2oGPT's tests:
  // {'score': 84.64214891738334, 'char_order': 6, 'word_order': 0, 'beta': 2}
  const ChrfScore c = corpus_chrf(
      {"The relationship between cats and dogs is not exactly friendly.",
       "a good bookshop is just a genteel black hole that knows how to read."},
      {"The relationship between dogs and cats is not exactly friendly.",
       "A good bookshop is just a genteel Black Hole that knows how to read."});
  CHECK_THAT(c.score, WithinAbs(84.64214891738334, 1e-9));
}

TEST_CASE("corpus chrF equals sacreBLEU's README example (2 references)", "[data][metrics]") {
  const ChrfScore c = corpus_chrf_multi(
      {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."},
      {{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
       {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}});
  CHECK(c.str() == "chrF2 = 59.73");
}

TEST_CASE("chrF with beta 3 and eps smoothing equals sacreBLEU's test_chrf.py",
          "[data][metrics]") {
  const ChrfOptions opts = ChrfOptions().beta(3).eps_smoothing(true);
  struct Case { Strings hyps, refs; double expected; };
  const std::vector<Case> cases = {
      {{"abcdefg"}, {"hijklmnop"}, 0.0},
      {{"a"}, {"b"}, 0.0},
      {{""}, {"b"}, 0.0},
      {{""}, {"ref"}, 0.0},
      {{""}, {"reference"}, 0.0},
      {{"aa"}, {"ab"}, 8.3333},
      {{"a", "b"}, {"a", "c"}, 8.3333},
      {{"a"}, {"a"}, 16.6667},
      {{"a b c"}, {"a b c"}, 50.0},
      {{"a b c"}, {"abc"}, 50.0},
      {{" risk assessment must be made of those who are qualified and expertise in the sector - "
        "these are the scientists ."},
       {"risk assessment has to be undertaken by those who are qualified and expert in that area "
        "- that is the scientists ."},
       63.361730},
      {{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
       64.1302698},
      {{"Niemand hat die Absicht, eine Mauer zu errichten"},
       {"Niemand hat die Absicht, eine Mauer zu errichten"},
       100.0},
  };
  for (const Case& c : cases) {
    INFO(c.hyps[0] << " | " << c.refs[0]);
    CHECK_THAT(corpus_chrf(c.hyps, c.refs, opts).score, WithinAbs(c.expected, 1e-4));
  }
}

TEST_CASE("chrF with beta 3, effective order, and with whitespace, equals sacreBLEU's tests",
          "[data][metrics]") {
  const ChrfOptions b3 = ChrfOptions().beta(3);
  CHECK_THAT(corpus_chrf({"a"}, {"a"}, b3).score, WithinAbs(100.0, 1e-4));
  CHECK_THAT(corpus_chrf({""}, {"reference"}, b3).score, WithinAbs(0.0, 1e-4));
  CHECK_THAT(corpus_chrf({"a b c"}, {"a b c"}, b3).score, WithinAbs(100.0, 1e-4));
  CHECK_THAT(corpus_chrf({"a b c"}, {"abc"}, b3).score, WithinAbs(100.0, 1e-4));
  CHECK_THAT(corpus_chrf({""}, {"c"}, b3).score, WithinAbs(0.0, 1e-4));
  CHECK_THAT(corpus_chrf({"a", "b"}, {"a", "c"}, b3).score, WithinAbs(50.0, 1e-4));
  CHECK_THAT(corpus_chrf({"aa"}, {"ab"}, b3).score, WithinAbs(25.0, 1e-4));

  const ChrfOptions ws = ChrfOptions().beta(3).whitespace(true);
  CHECK_THAT(
      corpus_chrf({"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
                  {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
                  ws).score,
      WithinAbs(67.3481606, 1e-4));
  CHECK_THAT(corpus_chrf({"risk assessment must be made of those who are qualified and expertise "
                          "in the sector - these are the scientists ."},
                         {"risk assessment has to be undertaken by those who are qualified and "
                          "expert in that area - that is the scientists ."},
                         ws).score,
             WithinAbs(65.2414427, 1e-4));
}

TEST_CASE("sentence chrF with eps smoothing equals sacreBLEU's Czech examples",
          "[data][metrics]") {
  // test_chrf.py test_sentence_level_chrf: sentence_chrf(..., eps_smoothing=True), beta 2.
  const ChrfOptions eps = ChrfOptions().eps_smoothing(true);
  const Strings hyps = {
      "Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
      "Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
      "Lapali po dechu, jejich životy skončily dřív, než skutečně začaly."};
  const Strings refs = {
      "Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře.",
      "A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři.",
      "Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, "
      "připomněli."};
  const double expected[] = {39.14078509, 31.22557079, 57.15704367};
  for (size_t i = 0; i < hyps.size(); ++i)
    CHECK_THAT(corpus_chrf({hyps[i]}, {refs[i]}, eps).score, WithinAbs(expected[i], 1e-4));
}

// ================================================================ chrF: derived by hand

TEST_CASE("chrF counts code points, not bytes", "[data][metrics]") {
  // "Grüße" is 5 code points (7 bytes): orders 1..5 have 5,4,3,2,1 n-grams, order 6 none.
  const ChrfStats st = chrf_stats("Grüße", {"Grüße"});
  CHECK(st.counts ==
        std::vector<int64_t>{5, 5, 5, 4, 4, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0});
  CHECK_THAT(chrf_from_stats(st).score, WithinAbs(100.0, 1e-12));
  // "Grüsse" shares G r ü e (4 of 6 hyp, 4 of 5 ref chars), "Gr" "rü" (2/5, 2/4), "Grü" (1/4,
  // 1/3), nothing longer (0/3, 0/2; 0/2, 0/1; order 6: ref has none -> hyp count 0, skipped).
  // Average over the 5 orders with n-grams on both sides.
  const double p = (4.0 / 6 + 2.0 / 5 + 1.0 / 4 + 0 + 0) / 5;
  const double r = (4.0 / 5 + 2.0 / 4 + 1.0 / 3 + 0 + 0) / 5;
  CHECK_THAT(corpus_chrf({"Grüsse"}, {"Grüße"}).score, WithinAbs(f_beta(p, r, 2), 1e-9));
}

TEST_CASE("chrF averages precision and recall over orders, then one F-score",
          "[data][metrics]") {
  // "ab" vs "abc": order 1 P = 2/2, R = 2/3; order 2 P = 1/1, R = 1/2; order 3 has no hyp
  // n-gram -> skipped. P = 1, R = 7/12, F2 = 5 * (7/12) / (4 + 7/12) = 7/11.
  const ChrfScore c = corpus_chrf({"ab"}, {"abc"});
  CHECK_THAT(c.score, WithinAbs(700.0 / 11, 1e-9));
  CHECK(c.str() == "chrF2 = 63.64");
  // Whitespace is removed before taking n-grams (also Unicode whitespace).
  CHECK_THAT(corpus_chrf({"a b"}, {"ab"}).score, WithinAbs(100.0, 1e-12));
  CHECK_THAT(corpus_chrf({"Straße\u3000frei"}, {"Straßefrei"}).score, WithinAbs(100.0, 1e-12));
  // ... unless whitespace(true): "a b" has 3 characters.
  CHECK(corpus_chrf({"a b"}, {"ab"}, ChrfOptions().whitespace(true)).score < 100.0);
  CHECK(corpus_chrf({""}, {"abc"}).score == 0.0);
  CHECK(corpus_chrf({"xyz"}, {"abc"}).score == 0.0);
}

TEST_CASE("chrF sums statistics over the corpus, a short reference hides hypothesis n-grams",
          "[data][metrics]") {
  // Sentence 1 "ab" vs "abc": order 1 (2, 3, 2), order 2 (1, 2, 1), order 3 (0, 1, 0).
  // Sentence 2 "xyz" vs "x": order 1 (3, 1, 1); the reference has no 2-gram, so sacreBLEU
  // counts no hypothesis 2-grams either: order 2 (0, 0, 0).
  // Corpus: order 1 (5, 4, 3), order 2 (1, 2, 1), order 3 (0, 1, 0) skipped.
  // P = (3/5 + 1) / 2 = 0.8, R = (3/4 + 1/2) / 2 = 0.625.
  const Strings hyps = {"ab", "xyz"}, refs = {"abc", "x"};
  CHECK(chrf_stats(hyps[1], {refs[1]}).counts ==
        std::vector<int64_t>{3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THAT(corpus_chrf(hyps, refs).score, WithinAbs(f_beta(0.8, 0.625, 2), 1e-9));

  ChrfStats sum = chrf_stats(hyps[0], {refs[0]});
  sum += chrf_stats(hyps[1], {refs[1]});
  CHECK(chrf_from_stats(sum).score == corpus_chrf(hyps, refs).score);
}

TEST_CASE("chrF with several references keeps the best one per sentence", "[data][metrics]") {
  // "abc" vs {"xyz", "abd"}: "abd" has the higher F, so the corpus uses its statistics.
  const ChrfScore multi = corpus_chrf_multi({"abc"}, {{"xyz"}, {"abd"}});
  CHECK(multi.score == corpus_chrf({"abc"}, {"abd"}).score);
}

TEST_CASE("corpus chrF rejects bad input", "[data][metrics]") {
  REQUIRE_THROWS_WITH(corpus_chrf({"a", "b"}, {"a", "b", "c"}),
                      Contains("2 hypotheses") && Contains("3 references"));
  REQUIRE_THROWS_AS(corpus_chrf({}, {}), rosetta::Error);
  REQUIRE_THROWS_AS(corpus_chrf({"a"}, {""}), rosetta::Error);
  REQUIRE_THROWS_AS(corpus_chrf({"a"}, {"a"}, ChrfOptions().char_order(0)), rosetta::Error);
  REQUIRE_THROWS_AS(chrf_from_stats(chrf_stats("a", {"a"}), ChrfOptions().char_order(4)),
                    rosetta::Error);
}
