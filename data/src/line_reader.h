// Internal helpers for reading UTF-8 text files line by line with 1-based line numbers.
//
// LineReader enforces a hard byte limit per line while reading (a file without newlines never
// gets loaded whole), drops a UTF-8 byte order mark at the start of the file and a trailing
// '\r' (CRLF files). Errors are rosetta::Error naming "file:line".
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <istream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rosetta::data {

// Throws unless `path` names an existing regular file (or a symlink to one).
void check_regular_file(const std::filesystem::path& path);

// Offset of the first byte that is not part of well-formed UTF-8 (no overlongs, surrogates or
// code points above U+10FFFF), or npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// Throws "file:line: ..." when `s` holds a NUL byte or invalid UTF-8 (byte offsets 1-based).
void check_text(std::string_view s, const std::string& file, size_t line);

// Appends code point `cp` (at most U+10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// `s` with every `from` replaced by `to`.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

// `s` with the typographic apostrophes ’ and ‘ made ASCII ' (both corpora do this).
std::string ascii_apostrophes(std::string_view s);

// `s` without leading and trailing ASCII whitespace.
std::string_view trim(std::string_view s);

class LineReader {
 public:
  static constexpr size_t kDefaultMaxLineBytes = size_t(1) << 20;

  LineReader(const std::filesystem::path& path, size_t max_line_bytes);
  // Reads `text` (copied) as if it were the file `name`, in chunks of `chunk_bytes` (tests use
  // tiny chunks to exercise lines that straddle chunks).
  LineReader(std::string_view text, std::string name, size_t max_line_bytes, size_t chunk_bytes = size_t(1) << 16);

  // Reads the open descriptor `fd` (not closed here) as the file `name`, as its bytes arrive:
  // standard input behind a terminal or a pipe.
  LineReader(int fd, std::string name, size_t max_line_bytes);

  // Reads the next line into `line` (without '\n', '\r\n' or the BOM); false at end of file.
  bool next(std::string& line);
  // Whether next() would return without waiting for input still to come: a whole line is
  // buffered, the end was reached, or (reading a descriptor) one arrives on a read that does
  // not wait. Reads what is there, never waits.
  bool ready();
  // 1-based number of the line last returned by next().
  size_t line_number() const { return line_; }
  const std::string& name() const { return name_; }

 private:
  bool fill();
  size_t read_some(char* at, size_t room);  // one read of the descriptor; 0 at its end

  std::unique_ptr<std::istream> in_;  // or, when null, the descriptor fd_
  int fd_ = -1;
  std::string name_;
  size_t max_line_bytes_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  size_t line_ = 0;
  bool eof_ = false;
};

}  // namespace rosetta::data
