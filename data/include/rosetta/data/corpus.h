// Parallel corpora: reading sentence pairs from text files, filtering them by length,
// tokenizing them.
//
// Two formats:
//   TSV      one pair per line, "source<TAB>target"
//   aligned  two files with one sentence per line, line i of one translating line i of the other
//            (train.de / train.en)
//
// Both readers accept CRLF line endings and a UTF-8 byte order mark, trim ASCII whitespace
// around each side, and skip (and count) pairs with an empty side, including blank lines.
// They reject with a rosetta::Error naming "file:line" (1-based; byte offsets 1-based too):
// invalid UTF-8, NUL bytes, a TSV line without exactly one tab, a line longer than
// max_line_bytes, aligned files of different lengths, a missing file, a directory, and a
// corpus with no usable pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/lifetime.h"

namespace rosetta::data {

class Tokenizer;

struct SentencePair {
  std::string src, tgt;
  friend bool operator==(const SentencePair&, const SentencePair&) = default;
};

// Reader options, with chainable setters. A limit of 0 means "no limit".
struct ReadOptions {
  size_t max_line_bytes_ = size_t(1) << 20;  // hard limit: a longer line is an error
  size_t max_bytes_ = 0;  // filter pairs whose source or target is longer (bytes, trimmed)
  size_t max_words_ = 0;  // filter pairs whose source or target has more whitespace words

  ROSETTA_SETTER(ReadOptions, max_line_bytes, size_t, max_line_bytes_)
  ROSETTA_SETTER(ReadOptions, max_bytes, size_t, max_bytes_)
  ROSETTA_SETTER(ReadOptions, max_words, size_t, max_words_)
};

// A corpus and what happened while reading it:
//   read == pairs.size() + skipped_empty + filtered_long
struct Corpus {
  std::vector<SentencePair> pairs;
  size_t read = 0;           // lines (TSV) or line pairs (aligned) read
  size_t skipped_empty = 0;  // a side was empty after trimming
  size_t filtered_long = 0;  // a side was over max_bytes or max_words
};

Corpus read_tsv(const std::filesystem::path& path, const ReadOptions& options = {});
Corpus read_aligned(const std::filesystem::path& src_path, const std::filesystem::path& tgt_path,
                    const ReadOptions& options = {});

// The same readers on text in memory; `name` (or src_name, tgt_name) stands for the file in
// errors ("name:line: ...").
Corpus parse_tsv(std::string_view text, const std::string& name, const ReadOptions& options = {});
Corpus parse_aligned(std::string_view src_text, std::string_view tgt_text, const std::string& src_name,
                     const std::string& tgt_name, const ReadOptions& options = {});

// The lines of a UTF-8 text file, as the readers above see them (a byte order mark and '\r'
// line endings dropped; every line checked: valid UTF-8, no NUL, at most max_line_bytes), for
// line-based input that is not a corpus (texts to translate, sweep grids, JSONL logs). Throws
// naming "file:line", or the file when it is missing or a directory.
std::vector<std::string> read_lines(const std::filesystem::path& path, const ReadOptions& options = {});
// The same on text in memory, `name` standing for the file in errors (e.g. "<stdin>").
std::vector<std::string> parse_lines(std::string_view text, const std::string& name, const ReadOptions& options = {});

// Writes "src<TAB>tgt\n" lines. Throws when a side holds a tab or a line break (it would not
// read back), or when the file cannot be written.
void write_tsv(const std::filesystem::path& path, const std::vector<SentencePair>& pairs);

// Throws "file:line: ..." (byte offsets 1-based) when `text`, one line of `file`, holds a NUL
// byte or invalid UTF-8: the check the readers apply to every line, for other line-based input.
void check_text(std::string_view text, const std::string& file, size_t line);

// Whitespace-separated words in `s` (ASCII whitespace).
size_t count_words(const std::string& s);

// ---------------------------------------------------------------- tokenized pairs

// Token ids of one pair, without bos/eos.
struct TokenPair {
  std::vector<int32_t> src, tgt;
};

// Encodes every pair, the source with `src_tok` and the target with `tgt_tok` (the same object
// for a joint vocabulary).
std::vector<TokenPair> tokenize(const std::vector<SentencePair>& pairs, const Tokenizer& src_tok,
                                const Tokenizer& tgt_tok);

// Removes, in place and keeping the order, pairs whose source has more than max_src tokens or
// whose target has more than max_tgt tokens (0 = no limit), and pairs with an empty side.
// Returns how many were removed. `kept`, when given, receives the original index of each kept
// pair, so a caller can filter a parallel vector (e.g. the SentencePairs) the same way.
size_t filter_by_tokens(std::vector<TokenPair>& pairs, size_t max_src, size_t max_tgt,
                        std::vector<size_t>* kept = nullptr);

}  // namespace rosetta::data
