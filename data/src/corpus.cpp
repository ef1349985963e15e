// Corpus readers (TSV and aligned files), length filters and tokenization of pairs.
#include "rosetta/data/corpus.h"

#include <fstream>
#include <system_error>

#include "line_reader.h"
#include "tsv_files.h"
#include "rosetta/core/check.h"
#include "rosetta/data/tokenizer.h"

namespace rosetta::data {

namespace {

// Adds one trimmed pair to `c`, or counts it as empty or too long.
void add_pair(Corpus& c, std::string_view src, std::string_view tgt, const ReadOptions& o) {
  ++c.read;
  src = trim(src);
  tgt = trim(tgt);
  if (src.empty() || tgt.empty()) {
    ++c.skipped_empty;
    return;
  }
  SentencePair p{std::string(src), std::string(tgt)};
  const bool too_long =
      (o.max_bytes_ && (p.src.size() > o.max_bytes_ || p.tgt.size() > o.max_bytes_)) ||
      (o.max_words_ && (count_words(p.src) > o.max_words_ || count_words(p.tgt) > o.max_words_));
  if (too_long) {
    ++c.filtered_long;
    return;
  }
  c.pairs.push_back(std::move(p));
}

void check_not_empty(const Corpus& c, const std::string& what) {
  ROSETTA_CHECK(!c.pairs.empty(), what, ": no usable sentence pairs (", c.read, " read, ",
                c.skipped_empty, " with an empty side, ", c.filtered_long, " too long)");
}

}  // namespace

size_t count_words(const std::string& s) {
  size_t n = 0;
  bool in_word = false;
  for (const char ch : s) {
    const bool ws = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
    if (!ws && !in_word) ++n;
    in_word = !ws;
  }
  return n;
}

namespace {

Corpus read_tsv_from(LineReader& reader, const ReadOptions& o) {
  Corpus c;
  std::string line;
  while (reader.next(line)) {
    const size_t ln = reader.line_number();
    check_text(line, reader.name(), ln);
    if (trim(line).empty()) {  // a blank line is an empty pair, not a malformed one
      add_pair(c, "", "", o);
      continue;
    }
    const size_t tab = line.find('\t');
    ROSETTA_CHECK(tab != std::string::npos, reader.name(), ":", ln,
                  ": no tab (expected \"source<TAB>target\")");
    const size_t tab2 = line.find('\t', tab + 1);
    ROSETTA_CHECK(tab2 == std::string::npos, reader.name(), ":", ln,
                  ": more than one tab at byte ", tab2 + 1,
                  " (expected \"source<TAB>target\")");
    add_pair(c, std::string_view(line).substr(0, tab), std::string_view(line).substr(tab + 1), o);
  }
  check_not_empty(c, reader.name());
  return c;
}

Corpus read_aligned_from(LineReader& src, LineReader& tgt, const ReadOptions& o) {
  Corpus c;
  std::string s, t;
  for (;;) {
    const bool has_s = src.next(s);
    const bool has_t = tgt.next(t);
    if (!has_s && !has_t) break;
    ROSETTA_CHECK(has_s, tgt.name(), ":", tgt.line_number(), ": no matching line in ",
                  src.name(), ", which has only ", src.line_number(), " lines");
    ROSETTA_CHECK(has_t, src.name(), ":", src.line_number(), ": no matching line in ",
                  tgt.name(), ", which has only ", tgt.line_number(), " lines");
    check_text(s, src.name(), src.line_number());
    check_text(t, tgt.name(), tgt.line_number());
    add_pair(c, s, t, o);
  }
  check_not_empty(c, src.name() + " + " + tgt.name());
  return c;
}

}  // namespace

Corpus read_tsv(const std::filesystem::path& path, const ReadOptions& o) {
  LineReader reader(path, o.max_line_bytes_);
  return read_tsv_from(reader, o);
}

Corpus parse_tsv(std::string_view text, const std::string& name, const ReadOptions& o) {
  LineReader reader(text, name, o.max_line_bytes_);
  return read_tsv_from(reader, o);
}

namespace {
std::vector<std::string> lines_from(LineReader& reader) {
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) {
    check_text(line, reader.name(), reader.line_number());
    lines.push_back(std::move(line));
  }
  return lines;
}
}  // namespace

std::vector<std::string> read_lines(const std::filesystem::path& path, const ReadOptions& o) {
  LineReader reader(path, o.max_line_bytes_);
  return lines_from(reader);
}

std::vector<std::string> parse_lines(std::string_view text, const std::string& name, const ReadOptions& o) {
  LineReader reader(text, name, o.max_line_bytes_);
  return lines_from(reader);
}

Corpus read_aligned(const std::filesystem::path& src_path, const std::filesystem::path& tgt_path,
                    const ReadOptions& o) {
  LineReader src(src_path, o.max_line_bytes_);
  LineReader tgt(tgt_path, o.max_line_bytes_);
  return read_aligned_from(src, tgt, o);
}

Corpus parse_aligned(std::string_view src_text, std::string_view tgt_text, const std::string& src_name,
                     const std::string& tgt_name, const ReadOptions& o) {
  LineReader src(src_text, src_name, o.max_line_bytes_);
  LineReader tgt(tgt_text, tgt_name, o.max_line_bytes_);
  return read_aligned_from(src, tgt, o);
}

void write_tsv(const std::filesystem::path& path, const std::vector<SentencePair>& pairs) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ROSETTA_CHECK(out.is_open(), path.string(), ": cannot open for writing");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const SentencePair& p = pairs[i];
    for (const std::string* side : {&p.src, &p.tgt})
      ROSETTA_CHECK(side->find_first_of("\t\r\n") == std::string::npos, path.string(),
                    ": pair ", i, " holds a tab or line break: \"", *side, "\"");
    out << p.src << '\t' << p.tgt << '\n';
  }
  out.close();
  ROSETTA_CHECK(!out.fail(), path.string(), ": write failed");
}

void write_tsv_atomically(const std::filesystem::path& dir, const std::string& name,
                          const std::vector<SentencePair>& pairs) {
  const auto tmp = dir / (name + ".tmp");
  write_tsv(tmp, pairs);
  std::error_code ec;
  std::filesystem::rename(tmp, dir / name, ec);
  ROSETTA_CHECK(!ec, (dir / name).string(), ": cannot replace (", ec.message(), ")");
}

void write_split_atomically(const std::filesystem::path& dir, const Split& split) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ROSETTA_CHECK(!ec, dir.string(), ": cannot create directory (", ec.message(), ")");
  write_tsv_atomically(dir, "train.tsv", split.train);
  write_tsv_atomically(dir, "valid.tsv", split.valid);
  write_tsv_atomically(dir, "test.tsv", split.test);
}

std::vector<TokenPair> tokenize(const std::vector<SentencePair>& pairs, const Tokenizer& src_tok,
                                const Tokenizer& tgt_tok) {
  std::vector<TokenPair> out(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    out[i].src = src_tok.encode(pairs[i].src);
    out[i].tgt = tgt_tok.encode(pairs[i].tgt);
  }
  return out;
}

size_t filter_by_tokens(std::vector<TokenPair>& pairs, size_t max_src, size_t max_tgt,
                        std::vector<size_t>* kept) {
  if (kept) kept->clear();
  size_t w = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const TokenPair& p = pairs[i];
    const bool drop = p.src.empty() || p.tgt.empty() || (max_src && p.src.size() > max_src) ||
                      (max_tgt && p.tgt.size() > max_tgt);
    if (drop) continue;
    if (w != i) pairs[w] = std::move(pairs[i]);
    if (kept) kept->push_back(i);
    ++w;
  }
  const size_t removed = pairs.size() - w;
  pairs.resize(w);
  return removed;
}

}  // namespace rosetta::data
