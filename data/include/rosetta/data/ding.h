// The default corpus: German -> English pairs from the Ding dictionary (Debian package
// trans-de-en, GPL-2+, file /usr/share/trans/de-en).
//
// A Ding line is one entry, German and English separated by " :: ":
//
//   Abmessung {f}; Maß {n} | Abmessungen {pl} | Ich habe ein paar Änderungen vorgenommen. ::
//     measurement; dimension | measurements | I’ve made one or two modifications.
//
// " | " separates aligned alternatives (position k of the German side translates position k of
// the English side), "; " separates synonyms within a position, and {}, [], (), <> hold
// annotations (gender, register, region, optional words). "/Abk./" marks abbreviations.
// Lines starting with '#' are comments.
//
// Extraction: every synonym of every aligned position is cleaned (annotations and "/Abk./" marks
// stripped, whitespace collapsed). A synonym is a usable sentence when it looks like one (first
// character upper case, a digit or an opening quote; last character . ! or ?, maybe followed by
// a closing quote) and holds neither a placeholder (sb. sth. jdm. jdn. jds. etw.) nor a slash
// alternative ("comes/arrives", "over / down": their extent is ambiguous; 24/7 is fine).
// A position with usable sentences on both sides gives sentence pairs from those; any other
// position gives phrase pairs from all its synonyms. Synonyms on the two sides are paired round
// robin: k German and m English synonyms give max(k, m) pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/lifetime.h"
#include "rosetta/data/corpus.h"

namespace rosetta::data {

struct DingOptions {
  size_t valid_ = 1000;             // distinct source sentences in valid.tsv
  size_t test_ = 1000;              // distinct source sentences in test.tsv
  bool phrases_ = false;            // also write phrases.tsv (all non-sentence pairs)
  bool ascii_apostrophes_ = true;   // ’ and ‘ -> '

  ROSETTA_SETTER(DingOptions, valid, size_t, valid_)
  ROSETTA_SETTER(DingOptions, test, size_t, test_)
  ROSETTA_SETTER(DingOptions, phrases, bool, phrases_)
  ROSETTA_SETTER(DingOptions, ascii_apostrophes, bool, ascii_apostrophes_)
};

// The pairs of one Ding line (empty for comments and blank lines).
struct DingEntry {
  std::vector<SentencePair> sentences;
  std::vector<SentencePair> phrases;
  bool aligned = true;  // false when the two sides have different numbers of " | " positions
};

// Parses one line (without its newline). A line without " :: " is an error.
DingEntry parse_ding_line(std::string_view line, const DingOptions& options = {});

// One synonym cleaned: annotations removed, whitespace collapsed, no space before . , ! ? ; :
std::string clean_ding_text(std::string_view text, const DingOptions& options = {});

// Whether cleaned text looks like a sentence (see the rules at the top).
bool is_sentence(std::string_view text);

// 64-bit FNV-1a hash of the bytes of `s`.
uint64_t fnv1a64(std::string_view s);

struct Split {
  std::vector<SentencePair> train, valid, test;
};

// Deterministic split by source: the distinct sources are ranked by (fnv1a64(src), src); the
// first n_valid go to valid, the next n_test to test, the rest to train. All pairs sharing a
// source land in the same split; each split keeps the input order. The result does not depend
// on the order of `pairs`, only the order within each split does.
Split split_by_hash(const std::vector<SentencePair>& pairs, size_t n_valid, size_t n_test);

// Removes, keeping the order, every pair whose source or target is the text of a source or a
// target in split.valid or split.test (the same English sentence can translate several German
// ones, which the split by source puts in different parts); returns how many were removed.
size_t remove_held_out_text(const Split& split, std::vector<SentencePair>& pairs);

// Keeps the first occurrence of each identical pair, in order; returns how many were removed.
size_t deduplicate(std::vector<SentencePair>& pairs);

struct DingCounts {
  size_t lines = 0;            // entry lines read (comments and blank lines excluded)
  size_t misaligned = 0;       // entries whose sides have different numbers of positions
  size_t sentence_pairs = 0;   // sentence pairs extracted, before deduplication
  size_t duplicates = 0;       // identical sentence pairs removed
  size_t train = 0, valid = 0, test = 0;
  size_t phrases = 0;          // pairs in phrases.tsv (0 unless options.phrases)
  // training pairs and phrases removed because a side is the text of a valid or test sentence
  size_t held_out_train = 0, held_out_phrases = 0;
};

// Reads the Ding file, writes OUT_DIR/train.tsv, valid.tsv, test.tsv (and phrases.tsv when
// asked), creating OUT_DIR if needed, and returns the counts. Files are replaced atomically
// (written beside and renamed), so running it twice gives the same files.
DingCounts prepare_ding_corpus(const std::filesystem::path& ding_path,
                               const std::filesystem::path& out_dir,
                               const DingOptions& options = {});

// What prepare_ding_corpus did, as the lines `rosetta prepare-corpus` logs: the entries and
// pairs read, the files written in `out_dir` (phrases.tsv where options.phrases) and the pairs
// held out.
std::vector<std::string> summary(const DingCounts& counts, const DingOptions& options, const std::string& out_dir);

}  // namespace rosetta::data
