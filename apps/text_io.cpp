#include "text_io.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "rosetta/core/io.h"

namespace rosetta::cli {

std::vector<std::string> read_lines(const std::string& path) {
  std::string text;
  if (path.empty() || path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    text = read_file(path);
  }
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
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

}  // namespace rosetta::cli
