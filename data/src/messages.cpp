// The messages corpus: gettext catalog entries filtered into pairs, split by English msgid.
#include "rosetta/data/messages.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "line_reader.h"
#include "rosetta/core/check.h"
#include "tsv_files.h"

namespace rosetta::data {

namespace {

// `text` normalised; nullopt when a line break or another control character remains inside.
std::optional<std::string> normalize(std::string_view text, bool apostrophes_to_ascii) {
  const std::string_view t = trim(text);
  std::string out;
  out.reserve(t.size());
  bool space = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (c < 0x20 || c == 0x7F) return std::nullopt;  // '\n', '\r', escape sequences, ...
    if (space) out += ' ';
    space = false;
    out += t[i];
  }
  return apostrophes_to_ascii ? ascii_apostrophes(out) : out;
}

}  // namespace

size_t count_code_points(std::string_view s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a continuation byte
  }));
}

std::string normalize_message(std::string_view text, bool ascii_apostrophes) {
  return normalize(text, ascii_apostrophes).value_or(std::string());
}

MessageVerdict message_pair(const MoEntry& e, const MessagesOptions& o, SentencePair& pair) {
  if (e.msgstr.empty() || e.msgstr.front().empty()) return MessageVerdict::kUntranslated;
  auto de = normalize(e.msgstr.front(), o.ascii_apostrophes_);
  auto en = normalize(e.msgid, o.ascii_apostrophes_);
  if (!de || !en) return MessageVerdict::kNotOneLine;
  for (const std::string* side : {&*de, &*en}) {
    const size_t n = count_code_points(*side);
    if (n < o.min_chars_) return MessageVerdict::kTooShort;
    if (n > o.max_chars_) return MessageVerdict::kTooLong;
  }
  if (*de == *en) return MessageVerdict::kSame;
  pair.src = std::move(*de);
  pair.tgt = std::move(*en);
  return MessageVerdict::kKept;
}

std::vector<std::filesystem::path> find_mo_files(const std::vector<std::filesystem::path>& inputs) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const fs::path& in : inputs) {
    std::error_code ec;
    const auto st = fs::status(in, ec);
    ROSETTA_CHECK(st.type() != fs::file_type::not_found, in.string(), ": no such file or directory");
    ROSETTA_CHECK(!ec, in.string(), ": cannot access (", ec.message(), ")");
    if (st.type() != fs::file_type::directory) {
      files.push_back(in);  // read_mo says what is wrong with it, if anything
      continue;
    }
    std::vector<fs::path> found;
    for (fs::directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".mo" && it->is_regular_file()) found.push_back(it->path());
    ROSETTA_CHECK(!ec, in.string(), ": cannot list (", ec.message(), ")");
    ROSETTA_CHECK(!found.empty(), in.string(), ": no .mo files in this directory");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::vector<SentencePair> collect_message_pairs(const std::vector<std::filesystem::path>& mo_files,
                                                const MessagesOptions& o, MessagesCounts& c) {
  std::vector<SentencePair> pairs;
  for (const auto& file : mo_files) {
    const MoCatalog cat = read_mo(file);
    if (!cat.skip_reason.empty()) {
      c.skipped.emplace_back(cat.name, cat.skip_reason);
      continue;
    }
    ++c.catalogs;
    const size_t before = pairs.size();
    for (const MoEntry& e : cat.entries) {
      ++c.entries;
      if (!e.msgid_plural.empty()) ++c.plurals;
      SentencePair p;
      switch (message_pair(e, o, p)) {
        case MessageVerdict::kKept: pairs.push_back(std::move(p)); break;
        case MessageVerdict::kUntranslated: ++c.untranslated; break;
        case MessageVerdict::kNotOneLine: ++c.not_one_line; break;
        case MessageVerdict::kTooShort: ++c.too_short; break;
        case MessageVerdict::kTooLong: ++c.too_long; break;
        case MessageVerdict::kSame: ++c.same; break;
      }
    }
    c.catalog_pairs.emplace_back(cat.name, pairs.size() - before);
  }
  return pairs;
}

Split split_messages(const std::vector<SentencePair>& pairs, const MessagesOptions& o,
                     MessagesCounts& c) {
  // split_by_hash ranks by source: give it the English side as the source, then swap back.
  std::vector<SentencePair> swapped;
  swapped.reserve(pairs.size());
  for (const SentencePair& p : pairs) swapped.push_back({p.tgt, p.src});
  Split split = split_by_hash(swapped, o.valid_, o.test_);
  for (auto* part : {&split.train, &split.valid, &split.test})
    for (SentencePair& p : *part) std::swap(p.src, p.tgt);
  c.held_out_train = remove_held_out_text(split, split.train);
  c.train = split.train.size();
  c.valid = split.valid.size();
  c.test = split.test.size();
  return split;
}

MessagesCounts prepare_messages_corpus(const std::vector<std::filesystem::path>& inputs,
                                       const std::filesystem::path& out_dir,
                                       const MessagesOptions& o) {
  MessagesCounts c;
  const auto files = find_mo_files(inputs);
  std::vector<SentencePair> pairs = collect_message_pairs(files, o, c);
  ROSETTA_CHECK(c.catalogs > 0, "none of the ", files.size(), " catalogs could be read (",
                c.skipped.front().first, ": ", c.skipped.front().second, ")");
  c.pairs = pairs.size();
  c.duplicates = deduplicate(pairs);
  const Split split = split_messages(pairs, o, c);
  ROSETTA_CHECK(!split.train.empty(), c.catalogs, " catalogs gave ", pairs.size(),
                " distinct pairs, none left for training after ", o.valid_, " valid and ",
                o.test_, " test msgids");

  write_split_atomically(out_dir, split);
  return c;
}

std::vector<std::string> summary(const MessagesCounts& c, const MessagesOptions& o, const std::string& out_dir) {
  using std::to_string;
  return {to_string(c.catalogs) + " catalogs read, " + to_string(c.skipped.size()) + " skipped; " +
              to_string(c.entries) + " entries (" + to_string(c.plurals) + " plural, singular taken)",
          "dropped: " + to_string(c.untranslated) + " untranslated, " + to_string(c.not_one_line) + " multi-line, " +
              to_string(c.too_short) + " shorter than " + to_string(o.min_chars_) + " characters, " +
              to_string(c.too_long) + " longer than " + to_string(o.max_chars_) + ", " + to_string(c.same) +
              " identical on both sides",
          to_string(c.pairs) + " pairs, " + to_string(c.duplicates) + " duplicates removed",
          "wrote " + out_dir + "/train.tsv (" + to_string(c.train) + " pairs), valid.tsv (" + to_string(c.valid) +
              "), test.tsv (" + to_string(c.test) + ")",
          "removed " + to_string(c.held_out_train) +
              " training pairs whose German or English side is a validation or test text"};
}

}  // namespace rosetta::data
