#include "text_io.h"

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string_view>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"

namespace rosetta::cli {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const std::string& path) {
  const bool from_stdin = path.empty() || path == "-";
  std::string text;
  if (from_stdin) {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    text = read_file(path);
  }
  const std::string name = from_stdin ? "<stdin>" : path;
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (lines.empty() && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    const size_t n = lines.size() + 1;
    ROSETTA_CHECK(line.size() <= kMaxLineBytes, name, ":", n, ": line longer than the limit of ", kMaxLineBytes,
                  " bytes");
    data::check_text(line, name, n);
    lines.emplace_back(line);
  }
  return lines;
}

void write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
  } else {
    write_file_atomic(path, text);
  }
}

void check_output_path(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  const fs::path p(path);
  std::error_code ec;
  ROSETTA_CHECK(!fs::is_directory(p, ec), flag, " ", path, " is a directory, expected a file name");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  ROSETTA_CHECK(fs::is_directory(dir, ec), flag, " ", path, ": ", dir.string(),
                fs::exists(dir, ec) ? " is not a directory" : " does not exist");
}

}  // namespace rosetta::cli
