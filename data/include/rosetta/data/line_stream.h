// Lines read as they arrive, for a translator behind a terminal or a pipe: the checks of
// read_lines (corpus.h) line by line, and whether the next line is there without waiting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "rosetta/data/corpus.h"

namespace rosetta::data {

class LineReader;

// The lines of a file or an open descriptor, one at a time, as read_lines sees them: a UTF-8
// byte order mark and '\r' line endings dropped, every line valid UTF-8 without a NUL byte and
// at most ReadOptions::max_line_bytes long; errors throw naming "file:line".
class LineStream {
 public:
  // The open descriptor `fd` (standard input; not closed here), named `name` in errors.
  LineStream(int fd, std::string name, const ReadOptions& options = {});
  // The regular file `path` (anything else is refused, naming it).
  explicit LineStream(const std::filesystem::path& path, const ReadOptions& options = {});
  ~LineStream();
  LineStream(LineStream&&) noexcept;
  LineStream& operator=(LineStream&&) noexcept;

  // The next line; waits for it (or the end) to arrive. False at the end.
  bool next(std::string& line);
  // Whether next() would return without waiting for input still to come (a whole line or the
  // end is there). Never waits.
  bool ready();
  const std::string& name() const;
  // The number of lines still to read when the stream was made, where the input is a regular
  // file (counted then); -1 otherwise (a terminal, a pipe).
  int64_t total_lines() const { return total_; }

 private:
  std::unique_ptr<LineReader> reader_;
  int64_t total_ = -1;
};

}  // namespace rosetta::data
