// Error reporting for the whole library: ROSETTA_CHECK throws rosetta::Error with a message
// built from its arguments (shapes, values), never exits and never logs.
#pragma once

#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

namespace rosetta {

// The one exception type the library throws for bad input or misuse.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// printf's formatting of one number, for messages and the text the layers above write (log
// lines, reports): num("%.4f", loss).
inline std::string num(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}
}  // namespace detail

}  // namespace rosetta

// ROSETTA_CHECK(cond, "matmul: shapes ", a.shape(), " and ", b.shape(), " do not match")
#define ROSETTA_CHECK(cond, ...)                                          \
  do {                                                                    \
    if (!(cond)) throw ::rosetta::Error(::rosetta::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ROSETTA_FAIL(...) throw ::rosetta::Error(::rosetta::detail::concat(__VA_ARGS__))
