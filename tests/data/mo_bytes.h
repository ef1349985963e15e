// Builds the bytes of a GNU .mo file in memory, for the catalog tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rosetta::test {

// (original, translation) pairs: an original "ctxt\x04id" has a context, "id\0plural" is a
// plural entry whose translation holds its forms separated by '\0'. Strings follow the two
// tables, each with its terminating NUL; `big_endian` writes every number the other way round.
inline std::string mo_bytes(const std::vector<std::pair<std::string, std::string>>& entries,
                            bool big_endian = false, uint32_t magic = 0x950412de,
                            uint32_t revision = 0) {
  std::string out;
  auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) out += char((v >> (8 * (big_endian ? 3 - k : k))) & 0xFF);
  };
  const auto n = uint32_t(entries.size());
  const uint32_t originals = 28, translations = originals + 8 * n;
  put(magic);
  put(revision);
  put(n);
  put(originals);
  put(translations);
  put(0);  // hash table size
  put(0);  // hash table offset
  std::string strings;
  uint32_t at = translations + 8 * n;
  std::vector<std::pair<uint32_t, uint32_t>> table;  // originals, then translations
  for (int side = 0; side < 2; ++side)
    for (const auto& e : entries) {
      const std::string& s = side == 0 ? e.first : e.second;
      table.emplace_back(uint32_t(s.size()), at + uint32_t(strings.size()));
      strings += s;
      strings += '\0';
    }
  for (const auto& [len, off] : table) {
    put(len);
    put(off);
  }
  return out + strings;
}

inline const char* kUtf8Header =
    "Project-Id-Version: demo 1.0\nLanguage: de\nMIME-Version: 1.0\n"
    "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n"
    "Plural-Forms: nplurals=2; plural=(n != 1);\n";

inline std::string header_with(const std::string& charset) {
  return "Language: de\nContent-Type: text/plain; charset=" + charset + "\n";
}

}  // namespace rosetta::test
