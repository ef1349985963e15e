// Checks of the CLI's numbers that CLI11 2.1's own validators let through.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>

namespace rosetta::cli {

// A number in [lo, hi]. CLI::Range lets NaN through (every comparison with it is false).
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "Value " + text + " is not a number";
        if (!(v >= lo && v <= hi)) return "Value " + text + " not in range " + CLI::detail::to_string(lo) + " to " + CLI::detail::to_string(hi);
        return std::string();
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

// An integer that fits T as written. CLI11 2.1 reads integers with strtoll/strtoull and keeps what
// they return: 99999999999999999999 became the largest int64 (--max-steps: no limit) and -1 the
// largest uint64 (--seed).
template <class T>
inline CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T v{};
        const char* b = text.data() + (text.starts_with('+') ? 1 : 0);
        const auto [end, err] = std::from_chars(b, text.data() + text.size(), v);
        if (err == std::errc::result_out_of_range || (std::is_unsigned_v<T> && text.starts_with('-')))
          return "Value " + text + " out of range " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max());
        if (err != std::errc() || end != text.data() + text.size()) return "Value " + text + " is not a whole number";
        return std::string();
      },
      "");
}

}  // namespace rosetta::cli
