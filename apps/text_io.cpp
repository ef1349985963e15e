#include "text_io.h"

#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <system_error>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"

namespace rosetta::cli {

std::vector<std::string> read_lines(const std::string& path) {
  if (!path.empty() && path != "-") return data::read_lines(path);
  // Read through the descriptor: a stream's rdbuf() copy reports no read error (stdin a
  // directory read as an empty input).
  return data::parse_lines(read_descriptor(STDIN_FILENO, "<stdin>"), "<stdin>");
}

void write_text(const std::string& path, const std::string& text) {
  TextOutput out(path);
  out.write(text);
  out.close();
}

// The names of standard output are written through it: replacing the file /dev/stdout leads to
// (a shell's `> file`) would leave the shell writing to a file no longer there.
TextOutput::TextOutput(const std::string& path) {
  if (!(path.empty() || path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1"))
    file_.emplace(path);
}

void TextOutput::write(std::string_view text) {
  if (file_) file_->write(text);
  else std::cout << text;
}

void TextOutput::flush() {
  if (!file_) check_stdout();
}

void TextOutput::close() {
  if (file_) file_->commit();
  else check_stdout();
}

void check_stdout() {
  errno = 0;
  std::cout.flush();
  ROSETTA_CHECK(std::cout.good(), "<stdout>: write failed",
                errno != 0 ? ": " + std::generic_category().message(errno) : std::string());
}

}  // namespace rosetta::cli
