// Ding dictionary parsing, sentence extraction and the hash split of the default corpus.
#include "rosetta/data/ding.h"

#include <algorithm>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "line_reader.h"
#include "tsv_files.h"
#include "rosetta/core/check.h"

namespace rosetta::data {

namespace {

bool is_open(char c) { return c == '(' || c == '[' || c == '{' || c == '<'; }
bool is_close(char c) { return c == ')' || c == ']' || c == '}' || c == '>'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Splits `s` at `sep`, ignoring separators inside brackets when `bracket_aware`.
std::vector<std::string_view> split(std::string_view s, std::string_view sep, bool bracket_aware) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (bracket_aware && is_open(s[i])) ++depth;
    else if (bracket_aware && is_close(s[i]) && depth > 0) --depth;
    else if (depth == 0 && s.compare(i, sep.size(), sep) == 0) {
      out.push_back(s.substr(start, i - start));
      i += sep.size() - 1;
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t b = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > b) words.emplace_back(s.substr(b, i - b));
  }
  return words;
}

// Ding's placeholders (somebody, something, jemand, etwas) mark templates, not sentences.
bool has_placeholder(std::string_view s) {
  static const std::string_view kMarks[] = {"sb.", "sth.", "jd.", "jdm.", "jdn.", "jds.", "etw."};
  for (const std::string_view m : kMarks)
    for (size_t p = s.find(m); p != std::string_view::npos; p = s.find(m, p + 1))
      if (p == 0 || !is_ascii_letter(s[p - 1])) return true;
  return false;
}

// "comes/arrives", "gut / schlecht": alternatives whose extent is ambiguous ("grow out of this
// habit / outgrow this habit"). Slashes between digits (24/7, 2009/10) are fine.
bool has_slash_alternative(std::string_view s) {
  for (size_t p = s.find('/'); p != std::string_view::npos; p = s.find('/', p + 1))
    if (p == 0 || p + 1 == s.size() || !is_digit(s[p - 1]) || !is_digit(s[p + 1])) return true;
  return false;
}

// A cleaned synonym usable as a training sentence.
bool usable_sentence(std::string_view s) {
  return is_sentence(s) && !has_placeholder(s) && !has_slash_alternative(s);
}

// Pairs k German and m English synonyms round robin into max(k, m) pairs.
void pair_round_robin(const std::vector<std::string>& de, const std::vector<std::string>& en,
                      std::vector<SentencePair>& out) {
  if (de.empty() || en.empty()) return;
  const size_t n = std::max(de.size(), en.size());
  for (size_t i = 0; i < n; ++i) out.push_back({de[i % de.size()], en[i % en.size()]});
}

}  // namespace

std::string clean_ding_text(std::string_view text, const DingOptions& o) {
  // 1. Drop bracketed annotations (nested ones too) and stray closing brackets.
  std::string flat;
  int depth = 0;
  for (const char c : text) {
    if (is_open(c) || is_close(c)) {
      depth = is_open(c) ? depth + 1 : std::max(0, depth - 1);
      flat += ' ';  // "a(b)c" -> "a c", not "ac"
    } else if (depth == 0) {
      flat += c;
    }
  }
  // 2. Join the words, dropping abbreviation marks "/Abk./".
  std::string joined;
  for (const std::string& w : split_words(flat)) {
    if (w.size() > 2 && w.front() == '/' && w.back() == '/') continue;
    if (!joined.empty()) joined += ' ';
    joined += w;
  }
  // 3. Tidy punctuation: no space before , ; : ! ? or a lone '.' (removed annotations leave
  //    one), and ".." -> "." (a typo in Ding; "..." stays).
  auto at = [](const std::string& s, size_t i) { return i < s.size() ? s[i] : '\0'; };
  std::string spaced;
  for (size_t i = 0; i < joined.size(); ++i) {
    const char next = at(joined, i + 1);
    const bool ellipsis = next == '.' && at(joined, i + 2) == '.';
    if (joined[i] == ' ' && next != '\0' && std::string_view(",;:!?.").find(next) !=
                                                 std::string_view::npos && !ellipsis)
      continue;
    spaced += joined[i];
  }
  std::string out;
  for (size_t i = 0; i < spaced.size(); ++i) {
    const bool double_dot = spaced[i] == '.' && at(spaced, i + 1) == '.' &&
                            at(spaced, i + 2) != '.' && (i == 0 || spaced[i - 1] != '.');
    if (!double_dot) out += spaced[i];
  }
  if (o.ascii_apostrophes_) {
    out = ascii_apostrophes(out);
  }
  return out;
}

bool is_sentence(std::string_view s) {
  if (s.size() < 2) return false;
  std::string_view body = s;
  // Allow a closing quote after the final punctuation: „Komm!“
  for (const std::string_view q : {"\"", "'", "\xE2\x80\x9C", "\xE2\x80\x9D", "\xC2\xBB", "\xC2\xAB"})
    if (ends_with(body, q)) {
      body.remove_suffix(q.size());
      break;
    }
  if (body.empty()) return false;
  const char end = body.back();
  if (end != '.' && end != '!' && end != '?') return false;
  const char c = s.front();
  if ((c >= 'A' && c <= 'Z') || is_digit(c) || c == '"' || c == '\'') return true;
  for (const std::string_view p : {"\xC3\x84", "\xC3\x96", "\xC3\x9C",   // Ä Ö Ü
                                   "\xE2\x80\x9E", "\xE2\x80\x9C",        // „ “
                                   "\xE2\x80\x9A", "\xE2\x80\x98",        // ‚ ‘
                                   "\xC2\xBB", "\xC2\xAB"})               // » «
    if (starts_with(s, p)) return true;
  return false;
}

DingEntry parse_ding_line(std::string_view line, const DingOptions& o) {
  DingEntry entry;
  if (trim(line).empty() || line.front() == '#') return entry;
  const size_t sep = line.find(" :: ");
  ROSETTA_CHECK(sep != std::string_view::npos, "not a Ding entry (no \" :: \"): \"",
                line.substr(0, 80), line.size() > 80 ? "..." : "", "\"");
  const auto de = split(line.substr(0, sep), " | ", false);
  const auto en = split(line.substr(sep + 4), " | ", false);
  if (de.size() != en.size()) {
    entry.aligned = false;
    return entry;
  }
  for (size_t k = 0; k < de.size(); ++k) {
    std::vector<std::string> de_all, en_all, de_sent, en_sent;
    for (const auto syn : split(de[k], "; ", true)) {
      std::string t = clean_ding_text(syn, o);
      if (t.empty()) continue;
      if (usable_sentence(t)) de_sent.push_back(t);
      de_all.push_back(std::move(t));
    }
    for (const auto syn : split(en[k], "; ", true)) {
      std::string t = clean_ding_text(syn, o);
      if (t.empty()) continue;
      if (usable_sentence(t)) en_sent.push_back(t);
      en_all.push_back(std::move(t));
    }
    if (!de_sent.empty() && !en_sent.empty()) pair_round_robin(de_sent, en_sent, entry.sentences);
    else pair_round_robin(de_all, en_all, entry.phrases);
  }
  return entry;
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : s) {
    h ^= uint64_t(static_cast<unsigned char>(c));
    h *= 1099511628211ull;
  }
  return h;
}

Split split_by_hash(const std::vector<SentencePair>& pairs, size_t n_valid, size_t n_test) {
  std::vector<std::pair<uint64_t, std::string_view>> sources;
  {
    std::unordered_set<std::string_view> seen;
    for (const SentencePair& p : pairs)
      if (seen.insert(p.src).second) sources.emplace_back(fnv1a64(p.src), p.src);
  }
  std::sort(sources.begin(), sources.end());
  std::unordered_map<std::string_view, int> where;  // 1 valid, 2 test; absent: train
  for (size_t r = 0; r < sources.size() && r < n_valid + n_test; ++r)
    where[sources[r].second] = r < n_valid ? 1 : 2;
  Split s;
  for (const SentencePair& p : pairs) {
    const auto it = where.find(p.src);
    (it == where.end() ? s.train : it->second == 1 ? s.valid : s.test).push_back(p);
  }
  return s;
}

size_t deduplicate(std::vector<SentencePair>& pairs) {
  std::unordered_set<std::string> seen;
  size_t w = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    // '\t' cannot occur inside a side that came through the readers or the Ding cleaner.
    if (!seen.insert(pairs[i].src + '\t' + pairs[i].tgt).second) continue;
    if (w != i) pairs[w] = std::move(pairs[i]);
    ++w;
  }
  const size_t removed = pairs.size() - w;
  pairs.resize(w);
  return removed;
}

size_t remove_held_out_text(const Split& split, std::vector<SentencePair>& pairs) {
  std::unordered_set<std::string_view> held_out;
  for (const auto* part : {&split.valid, &split.test})
    for (const SentencePair& p : *part) {
      held_out.insert(p.src);
      held_out.insert(p.tgt);
    }
  size_t w = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (held_out.count(pairs[i].src) || held_out.count(pairs[i].tgt)) continue;
    if (w != i) pairs[w] = std::move(pairs[i]);
    ++w;
  }
  const size_t removed = pairs.size() - w;
  pairs.resize(w);
  return removed;
}

DingCounts prepare_ding_corpus(const std::filesystem::path& ding_path,
                               const std::filesystem::path& out_dir, const DingOptions& o) {
  LineReader reader(ding_path, LineReader::kDefaultMaxLineBytes);
  DingCounts counts;
  std::vector<SentencePair> sentences, phrases;
  std::string line;
  while (reader.next(line)) {
    check_text(line, reader.name(), reader.line_number());
    if (trim(line).empty() || line.front() == '#') continue;
    ++counts.lines;
    DingEntry e;
    try {
      e = parse_ding_line(line, o);
    } catch (const Error& err) {
      ROSETTA_FAIL(reader.name(), ":", reader.line_number(), ": ", err.what());
    }
    if (!e.aligned) ++counts.misaligned;
    for (auto& p : e.sentences) sentences.push_back(std::move(p));
    if (o.phrases_)
      for (auto& p : e.phrases) phrases.push_back(std::move(p));
  }
  counts.sentence_pairs = sentences.size();
  counts.duplicates = deduplicate(sentences);
  Split split = split_by_hash(sentences, o.valid_, o.test_);
  counts.held_out_train = remove_held_out_text(split, split.train);
  ROSETTA_CHECK(!split.train.empty(), reader.name(), ": ", sentences.size(),
                " sentence pairs found, none left for training after ", o.valid_, " valid and ",
                o.test_, " test sources (is this the Ding de-en file?)");

  write_split_atomically(out_dir, split);
  counts.train = split.train.size();
  counts.valid = split.valid.size();
  counts.test = split.test.size();
  if (o.phrases_) {
    deduplicate(phrases);
    counts.held_out_phrases = remove_held_out_text(split, phrases);
    write_tsv_atomically(out_dir, "phrases.tsv", phrases);
    counts.phrases = phrases.size();
  }
  return counts;
}

std::vector<std::string> summary(const DingCounts& c, const DingOptions& o, const std::string& out_dir) {
  using std::to_string;
  std::vector<std::string> lines{
      to_string(c.lines) + " entries, " + to_string(c.misaligned) + " misaligned, " + to_string(c.sentence_pairs) +
          " sentence pairs, " + to_string(c.duplicates) + " duplicates removed",
      "wrote " + out_dir + "/train.tsv (" + to_string(c.train) + " pairs), valid.tsv (" + to_string(c.valid) +
          "), test.tsv (" + to_string(c.test) + ")"};
  if (o.phrases_) lines.push_back("wrote " + out_dir + "/phrases.tsv (" + to_string(c.phrases) + " pairs)");
  lines.push_back("removed " + to_string(c.held_out_train) + " training pairs and " + to_string(c.held_out_phrases) +
                  " phrases whose source or target is a validation or test sentence");
  return lines;
}

}  // namespace rosetta::data
