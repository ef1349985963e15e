// The "messages" corpus: German software messages and their English originals, from gettext
// catalogs (.mo files, e.g. Debian's /usr/share/locale/de/LC_MESSAGES/*.mo; see
// scripts/prepare-messages.sh for the fixed package list).
//
// Each catalog entry gives at most one pair, German msgstr -> English msgid (source German,
// target English, as in the Ding corpus):
//   - the header (empty msgid) is skipped, and so is an entry without a translation;
//   - a context ("ctxt\x04msgid") is dropped from the msgid;
//   - a plural entry gives its singular pair only (msgid -> msgstr[0]); msgid_plural and the
//     other forms are not used;
//   - each side is normalised: leading and trailing whitespace (the "\n" ending many printf
//     formats included) removed, runs of spaces and tabs inside made one space, ’ and ‘ made '
//     (as the Ding corpus does, unless turned off); a side that still holds a line break or any
//     other control character is dropped (multi-line help texts), so a tab never reaches the TSV;
//   - a side shorter than min_chars or longer than max_chars (Unicode code points) is dropped,
//     and so is a pair whose two sides are equal (untranslated names, formats like "%s: %s").
// Fuzzy translations are not in .mo files (msgfmt leaves them out), so none is seen here.
//
// Identical pairs from several catalogs are kept once (the first, in catalog order). The split
// is by the English side: the distinct msgids are ranked by (fnv1a64(msgid), msgid), the first
// `valid` go to valid.tsv, the next `test` to test.tsv, the rest to train.tsv; so one msgid
// translated in two packages, or twice, never lands in two splits. Training pairs whose German
// or English side is the text of a validation or test pair are then removed (as for Ding).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/core/lifetime.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/ding.h"  // Split, split_by_hash, deduplicate
#include "rosetta/data/mo.h"

namespace rosetta::data {

struct MessagesOptions {
  size_t valid_ = 1000;            // distinct English msgids in valid.tsv
  size_t test_ = 1000;             // distinct English msgids in test.tsv
  size_t min_chars_ = 2;           // shortest side kept, in code points
  size_t max_chars_ = 200;         // longest side kept, in code points
  bool ascii_apostrophes_ = true;  // ’ and ‘ -> '

  ROSETTA_SETTER(MessagesOptions, valid, size_t, valid_)
  ROSETTA_SETTER(MessagesOptions, test, size_t, test_)
  ROSETTA_SETTER(MessagesOptions, min_chars, size_t, min_chars_)
  ROSETTA_SETTER(MessagesOptions, max_chars, size_t, max_chars_)
  ROSETTA_SETTER(MessagesOptions, ascii_apostrophes, bool, ascii_apostrophes_)
};

// What became of one catalog entry.
enum class MessageVerdict { kKept, kUntranslated, kNotOneLine, kTooShort, kTooLong, kSame };

// The pair of `entry` (German msgstr[0] -> English msgid, normalised) in `pair` when the verdict
// is kKept; `pair` is unspecified otherwise.
MessageVerdict message_pair(const MoEntry& entry, const MessagesOptions& options,
                            SentencePair& pair);

// `text` normalised as above; "" when it holds a line break or another control character
// (after the outer whitespace is removed).
std::string normalize_message(std::string_view text, bool ascii_apostrophes = true);

// Number of Unicode code points in valid UTF-8 `s`.
size_t count_code_points(std::string_view s);

// The .mo files named by `inputs`: a file is taken as it is, a directory gives the *.mo files
// directly in it, sorted by name. Throws for a missing input and for a directory without one.
std::vector<std::filesystem::path> find_mo_files(const std::vector<std::filesystem::path>& inputs);

struct MessagesCounts {
  size_t catalogs = 0;                                         // catalogs read
  std::vector<std::pair<std::string, std::string>> skipped;    // (catalog, reason) not read
  std::vector<std::pair<std::string, size_t>> catalog_pairs;   // (catalog, pairs it gave)
  size_t entries = 0;       // entries read, the headers excluded
  size_t plurals = 0;       // plural entries (their singular pair considered)
  size_t untranslated = 0, not_one_line = 0, too_short = 0, too_long = 0, same = 0;
  size_t pairs = 0;         // pairs kept, before deduplication
  size_t duplicates = 0;    // identical pairs removed
  size_t train = 0, valid = 0, test = 0;
  size_t held_out_train = 0;  // training pairs removed: a side is the text of a valid/test pair
};

// The pairs of the catalogs, in order, before deduplication; fills the reading and filtering
// counts of `counts`. Skips (and records) catalogs whose charset is not supported; any other
// problem with a catalog is an error naming it.
std::vector<SentencePair> collect_message_pairs(const std::vector<std::filesystem::path>& mo_files,
                                                const MessagesOptions& options,
                                                MessagesCounts& counts);

// The split described at the top (by English side, then held-out text removed from train);
// sets the split counts of `counts`.
Split split_messages(const std::vector<SentencePair>& pairs, const MessagesOptions& options,
                     MessagesCounts& counts);

// The whole pipeline: finds the catalogs, collects, deduplicates and splits their pairs, writes
// OUT_DIR/train.tsv, valid.tsv and test.tsv (replaced atomically; OUT_DIR created if needed),
// and returns the counts. Throws when no training pair is left.
MessagesCounts prepare_messages_corpus(const std::vector<std::filesystem::path>& inputs,
                                       const std::filesystem::path& out_dir,
                                       const MessagesOptions& options = {});

// What prepare_messages_corpus did, as the lines `rosetta prepare-messages` logs after those of
// each catalog (catalog_pairs, skipped): the catalogs and entries read, the entries dropped and
// why, the pairs kept, the files written in `out_dir` and the pairs held out.
std::vector<std::string> summary(const MessagesCounts& counts, const MessagesOptions& options,
                                 const std::string& out_dir);

}  // namespace rosetta::data
