// Checks of the CLI's numbers that CLI11 2.1's own validators let through, and options whose
// words are an enum's.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "rosetta/core/enum_names.h"

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

// An enum option takes its words (`choices`, or all of the enum's), and shows them and its
// default as a text option does: "--schedule TEXT:{constant,...}=inverse-sqrt".
template <class E>
CLI::Option* add_enum_option(CLI::App& cmd, const std::string& flag, E& value, const std::string& description,
                             std::vector<std::string> choices = {}) {
  if (choices.empty()) choices = enum_words<E>();
  return cmd
      .add_option_function<std::string>(
          flag, [&value](const std::string& word) { value = parse_enum<E>(word); }, description)
      ->check(CLI::IsMember(choices))
      ->default_str(enum_name(value));
}

}  // namespace rosetta::cli
