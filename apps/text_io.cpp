#include "text_io.h"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"

namespace rosetta::cli {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const std::string& path) {
  if (!path.empty() && path != "-") return data::read_lines(path);
  std::ostringstream text;
  text << std::cin.rdbuf();
  return data::parse_lines(text.str(), "<stdin>");
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
