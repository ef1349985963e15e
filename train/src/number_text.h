// printf's formatting of one number, for the text the train layer writes (log lines, the report).
#pragma once

#include <cstdio>
#include <string>

namespace rosetta::train::detail {

// num("%.4f", loss)
inline std::string num(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

}  // namespace rosetta::train::detail
