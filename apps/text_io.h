// Reading and writing text for the CLI: whole files or standard input, line by line, with
// clear errors naming the file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/io.h"

namespace rosetta::cli {

// Lines of FILE ("-" or "" = standard input) as data::read_lines reads them: CR stripped, a
// UTF-8 byte order mark dropped; throws naming the file (and line) when it is missing, a
// directory or unreadable, or a line holds invalid UTF-8 or a NUL byte or is longer than the
// corpus readers' limit (data::ReadOptions).
std::vector<std::string> read_lines(const std::string& path);
// Writes text to FILE atomically ("-", "" or /dev/stdout = standard output); throws when it was
// not written.
void write_text(const std::string& path, const std::string& text);
// Text written as it comes to FILE ("-", "" or /dev/stdout = standard output, flushed by
// flush()), or to a file put in place by close() (AtomicFileWriter: never half-written).
class TextOutput {
 public:
  explicit TextOutput(const std::string& path);
  void write(std::string_view text);
  void flush();  // standard output: now, and throws unless it arrived
  void close();

 private:
  std::optional<AtomicFileWriter> file_;
};
// Flushes standard output and throws unless everything written to it arrived (a full disk).
void check_stdout();

}  // namespace rosetta::cli
