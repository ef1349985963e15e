// A text split into sentences and joined back (service.h: split_sentences, join_sentences).
//
// The text is read as alternating runs: words (no whitespace) and gaps (whitespace). A sentence
// is a sequence of words and the gaps between them; it ends at a gap that holds a '\n', or after
// a word that ends a sentence ('.', '!', '?' or '…', then any closing quotes and brackets).
// Everything outside the sentences is kept verbatim in leading, separators and trailing, which is
// why joining gives the text back byte for byte.
#include <array>
#include <string_view>

#include "rosetta/core/check.h"
#include "rosetta/translator/service.h"

namespace rosetta::translator {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Closing quotes and brackets that may follow the end of a sentence (UTF-8): " ' ) ] } and
// “ ” ‘ ’ (German closes with “ and ‘, English with ” and ’) » « › ‹ (French and German guillemets).
constexpr std::array<std::string_view, 13> kClosers{"\"", "'", ")", "]", "}", "\u201C", "\u201D", "\u2018",
                                                    "\u2019", "\u00BB", "\u00AB", "\u203A", "\u2039"};
constexpr std::array<std::string_view, 4> kEnds{".", "!", "?", "\u2026"};

// True when `word` ends a sentence: a sentence end, then closing quotes or brackets, if any.
bool ends_sentence(std::string_view word) {
  for (bool stripped = true; stripped && !word.empty();) {
    stripped = false;
    for (std::string_view c : kClosers)
      if (ends_with(word, c)) {
        word.remove_suffix(c.size());
        stripped = true;
        break;
      }
  }
  for (std::string_view e : kEnds)
    if (ends_with(word, e)) return true;
  return false;
}

}  // namespace

SplitText split_sentences(const std::string& text) {
  SplitText out;
  const size_t n = text.size();
  size_t at = 0;
  while (at < n && is_space(text[at])) ++at;
  out.leading = text.substr(0, at);
  if (at == n) return out;  // no sentence: the whole text is leading
  size_t start = at;        // of the current sentence
  for (;;) {
    // A word [at, word_end), then a gap [word_end, gap_end).
    size_t word_end = at;
    while (word_end < n && !is_space(text[word_end])) ++word_end;
    size_t gap_end = word_end;
    bool line_break = false;
    for (; gap_end < n && is_space(text[gap_end]); ++gap_end) line_break |= text[gap_end] == '\n';
    if (gap_end == n) {  // the last word
      out.sentences.push_back(text.substr(start, word_end - start));
      out.trailing = text.substr(word_end);
      return out;
    }
    if (line_break || ends_sentence(std::string_view(text).substr(at, word_end - at))) {
      out.sentences.push_back(text.substr(start, word_end - start));
      out.separators.push_back(text.substr(word_end, gap_end - word_end));
      start = gap_end;
    }
    at = gap_end;
  }
}

std::string join_sentences(const SplitText& split, const std::vector<std::string>& translations) {
  ROSETTA_CHECK(translations.size() == split.sentences.size(), "join_sentences: ", translations.size(),
                " translations for ", split.sentences.size(), " sentences");
  ROSETTA_CHECK(split.separators.size() + 1 == split.sentences.size() ||
                    (split.sentences.empty() && split.separators.empty()),
                "join_sentences: ", split.separators.size(), " separators for ", split.sentences.size(), " sentences");
  std::string out = split.leading;
  for (size_t i = 0; i < translations.size(); ++i) {
    if (i) out += split.separators[i - 1];
    out += translations[i];
  }
  return out + split.trailing;
}

}  // namespace rosetta::translator
