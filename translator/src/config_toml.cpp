// The lines of a TOML configuration (config.h: config_toml_lines): a scanner that checks each
// line's form and finds where each key is.
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "rosetta/core/check.h"
#include "rosetta/translator/config.h"

namespace rosetta::translator {

using rosetta::detail::concat;

namespace {

bool bare_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// A TOML number (underscores allowed between digits), inf or nan, with an optional sign.
bool toml_number(std::string_view v) {
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) v.remove_prefix(1);
  if (v == "inf" || v == "nan") return true;
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || (v[i] == '_' && i > from))) ++i;
    return i > from && v[i - 1] != '_';
  };
  if (!digits()) return false;
  if (i < v.size() && v[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    if (++i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == v.size();
}

// Where the value that starts at `at` ends (one past it), or npos when no TOML value starts
// there: a quoted string, a one-line array, true, false or a number.
size_t toml_value_end(const std::string& line, size_t at) {
  if (at >= line.size()) return std::string::npos;
  if (line[at] == '"') {
    for (size_t i = at + 1; i < line.size(); ++i) {
      if (line[i] == '\\') ++i;
      else if (line[i] == '"') return i + 1;
    }
    return std::string::npos;
  }
  if (line[at] == '\'') {
    const size_t close = line.find('\'', at + 1);
    return close == std::string::npos ? close : close + 1;
  }
  if (line[at] == '[') {
    const size_t close = line.rfind(']');
    return close == std::string::npos || close < at ? std::string::npos : close + 1;
  }
  size_t end = at;
  while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end])) && line[end] != '#') ++end;
  const std::string_view v(line.data() + at, end - at);
  return v == "true" || v == "false" || toml_number(v) ? end : std::string::npos;
}

// True when only blanks, and perhaps a comment, follow `at`.
bool rest_is_blank(const std::string& line, size_t at) {
  const size_t next = line.find_first_not_of(" \t", at);
  return next == std::string::npos || line[next] == '#';
}

}  // namespace

// A scanner, not std::regex, whose matcher recurses once per character and could overflow the
// stack on a long line.
std::map<std::string, int> config_toml_lines(const std::string& toml, const std::string& name) {
  std::map<std::string, int> lines;  // "key" or "table.key" -> line
  std::istringstream in(toml);
  std::string line, prefix;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto shown = [&] { return concat("'", line.substr(first, 80), line.size() - first > 80 ? "...'" : "'"); };
    if (line[first] == '[') {
      const size_t close = line.find(']', first);
      std::string table = close == std::string::npos ? "" : line.substr(first + 1, close - first - 1);
      table.erase(0, table.find_first_not_of(" \t"));
      table.erase(table.find_last_not_of(" \t") + 1);
      ROSETTA_CHECK(!table.empty() && std::all_of(table.begin(), table.end(), bare_key_char) &&
                        rest_is_blank(line, close + 1),
                    name, ":", n, ": ", shown(), " is not a [table] header");
      prefix = table + ".";
      continue;
    }
    size_t i = first;
    while (i < line.size() && bare_key_char(line[i])) ++i;
    const std::string key = line.substr(first, i - first);
    i = line.find_first_not_of(" \t", i);
    const bool assigned = !key.empty() && i != std::string::npos && line[i] == '=';
    const size_t value = assigned ? line.find_first_not_of(" \t", i + 1) : std::string::npos;
    const size_t end = value == std::string::npos ? value : toml_value_end(line, value);
    ROSETTA_CHECK(end != std::string::npos && rest_is_blank(line, end), name, ":", n, ": ", shown(),
                  " is not key = value with one value (a number, true or false, or a quoted string)");
    const auto [at, added] = lines.emplace(prefix + key, n);
    ROSETTA_CHECK(added, name, ":", n, ": ", key, " is given again (first on line ", at->second, ")");
  }
  return lines;
}

}  // namespace rosetta::translator
