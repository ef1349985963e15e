// Enums that options, logs and files spell as words (--schedule cosine, "max-steps" in a log,
// model.activation in a checkpoint): each enum lists its words once, and one parse and one name
// function read that list.
//
// An enum E declares its list with a function found by argument-dependent lookup, beside E:
//
//   enum class Shape { linear, cosine };
//   constexpr EnumNames<Shape, 2> enum_names(Shape) { return {"shape", {{{Shape::linear, "linear"},
//                                                                         {Shape::cosine, "cosine"}}}}; }
//
// then parse_enum<Shape>("cosine") is Shape::cosine, enum_name(Shape::linear) is "linear", and
// parse_enum<Shape>("sine") throws "unknown shape 'sine' (linear or cosine)". Each layer names
// the pair for its own enums in the pattern of parse_precision / precision_name.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rosetta/core/check.h"

namespace rosetta {

template <class E, size_t N>
struct EnumNames {
  const char* what;  // what a value is, for errors: "schedule", "stop reason"
  std::array<std::pair<E, const char*>, N> names;  // every value and its word, in the order of the help
};

// The words of E, in order: the choices of an option.
template <class E>
std::vector<std::string> enum_words() {
  std::vector<std::string> words;
  for (const auto& [value, word] : enum_names(E{}).names) words.emplace_back(word);
  return words;
}

// "a", "a or b", "a, b or c".
inline std::string or_list(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) s += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return s;
}

// The word of `value`; throws for a value the list does not hold (a cast integer).
template <class E>
const char* enum_name(E value) {
  for (const auto& [v, word] : enum_names(E{}).names)
    if (v == value) return word;
  ROSETTA_FAIL("no ", enum_names(E{}).what, " has the value ", static_cast<long long>(value));
}

// The value whose word is `word`; throws "unknown WHAT 'WORD' (a, b or c)" otherwise.
template <class E>
E parse_enum(std::string_view word) {
  for (const auto& [v, w] : enum_names(E{}).names)
    if (word == w) return v;
  ROSETTA_FAIL("unknown ", enum_names(E{}).what, " '", word, "' (", or_list(enum_words<E>()), ")");
}

}  // namespace rosetta
