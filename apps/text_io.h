// Reading and writing text for the CLI: whole files or standard input, line by line, with
// clear errors naming the file.
#pragma once

#include <string>
#include <vector>

namespace rosetta::cli {

// Lines of FILE ("-" or "" = standard input), CR stripped. Throws naming the file when it is
// missing, a directory or unreadable.
std::vector<std::string> read_lines(const std::string& path);
// Writes text to FILE atomically ("-" or "" = standard output).
void write_text(const std::string& path, const std::string& text);

}  // namespace rosetta::cli
