// libFuzzer target for the corpus readers (data::parse_tsv, data::parse_aligned and the
// LineReader under them): any input must either read or throw rosetta::Error; anything else (a
// crash, a sanitizer report, another exception, a broken invariant) is a bug.
//
// Input layout: byte 0 picks the LineReader chunk size (1..16 bytes, so that lines straddle
// chunks), byte 1 the line limit (1..64 bytes), byte 2 where the text splits into source and
// target for parse_aligned; the rest is the text. Besides the readers' invariants, LineReader
// is checked against a reference line splitter written from its documentation.
//
// Built by scripts/ci-extra.sh (CMake, -DROSETTA_FUZZ=ON with clang); seeds in corpus/corpus/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "line_reader.h"
#include "rosetta/core/check.h"
#include "rosetta/data/corpus.h"

namespace {

using rosetta::data::Corpus;

void require(bool ok) {
  if (!ok) std::abort();
}

// What LineReader documents: lines split at '\n' (no line after a final '\n'), a trailing '\r'
// dropped, then a UTF-8 byte order mark at the start of the file; a line longer than `limit`
// bytes after that is an error at its line number. Returns the lines before the first error and
// the (1-based) line of the error, if any.
std::pair<std::vector<std::string>, std::optional<size_t>> reference_lines(std::string_view text, size_t limit) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string line(text.substr(at, nl - at));
    at = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lines.empty() && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (line.size() > limit) return {lines, lines.size() + 1};
    lines.push_back(std::move(line));
  }
  return {lines, std::nullopt};
}

void check_line_reader(std::string_view text, size_t chunk, size_t limit) {
  const auto [expected, error_line] = reference_lines(text, limit);
  rosetta::data::LineReader reader(text, "fuzz.txt", limit, chunk);
  std::vector<std::string> got;
  std::optional<size_t> got_error;
  std::string line;
  try {
    while (reader.next(line)) {
      require(reader.line_number() == got.size() + 1);
      got.push_back(line);
    }
  } catch (const rosetta::Error& e) {
    got_error = got.size() + 1;
    const std::string where = "fuzz.txt:" + std::to_string(*got_error) + ": line longer than the limit";
    require(std::string_view(e.what()).substr(0, where.size()) == where);
  }
  require(got == expected);
  require(got_error == error_line);
}

// The readers' promises about what they return.
void check_corpus(const Corpus& c, bool tsv) {
  require(c.read == c.pairs.size() + c.skipped_empty + c.filtered_long);
  require(!c.pairs.empty());
  for (const auto& p : c.pairs) {
    for (const std::string* side : {&p.src, &p.tgt}) {
      require(!side->empty());
      require(rosetta::data::trim(*side).size() == side->size());
      require(side->find_first_of(std::string_view("\0\n", 2)) == std::string::npos);
      require(rosetta::data::find_invalid_utf8(*side) == std::string_view::npos);
    }
    // A TSV side never holds a tab (an aligned sentence may).
    if (tsv) require(p.src.find('\t') == std::string::npos && p.tgt.find('\t') == std::string::npos);
  }
}

void read(bool tsv, const std::function<Corpus()>& fn) {
  try {
    check_corpus(fn(), tsv);
  } catch (const rosetta::Error&) {
    // Rejected input: the expected outcome for most inputs.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const size_t limit = 1 + data[1] % 64;
  const std::string_view text(reinterpret_cast<const char*>(data) + 3, size - 3);
  const size_t split = text.size() * data[2] / 255;

  check_line_reader(text, chunk, limit);
  const auto small = rosetta::data::ReadOptions().max_line_bytes(limit).max_words(3).max_bytes(20);
  read(true, [&] { return rosetta::data::parse_tsv(text, "fuzz.tsv"); });
  read(true, [&] { return rosetta::data::parse_tsv(text, "fuzz.tsv", small); });
  read(false, [&] {
    return rosetta::data::parse_aligned(text.substr(0, split), text.substr(split), "fuzz.de", "fuzz.en");
  });
  read(false, [&] {
    return rosetta::data::parse_aligned(text.substr(0, split), text.substr(split), "fuzz.de", "fuzz.en", small);
  });
  return 0;
}
