// The .mo reader: tables checked against the file size, strings split into context, plural and
// forms, ISO-8859-1/-15 converted to UTF-8.
#include "rosetta/data/mo.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "line_reader.h"
#include "rosetta/core/check.h"

namespace rosetta::data {

namespace {

constexpr uint32_t kMagic = 0x950412de;
constexpr uint32_t kMagicSwapped = 0xde120495;
constexpr size_t kHeaderBytes = 20;  // magic, revision, N, O, T
constexpr uintmax_t kMaxFileBytes = uintmax_t(256) << 20;

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string lower_alnum(std::string_view s) {  // "ISO-8859-1" -> "iso88591"
  std::string out;
  for (const char c : s)
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) out += c;
    else if (c >= 'A' && c <= 'Z') out += char(c - 'A' + 'a');
  return out;
}

// How the strings of a catalog become UTF-8.
enum class Encoding { kUtf8, kLatin1, kLatin9, kUnsupported };

Encoding encoding_of(std::string_view charset) {
  const std::string c = lower_alnum(charset);
  if (c.empty() || c == "utf8" || c == "ascii" || c == "usascii" || c == "ansix341968")
    return Encoding::kUtf8;  // ASCII is UTF-8; a catalog without a charset is taken as UTF-8
  if (c == "iso88591" || c == "latin1" || c == "l1") return Encoding::kLatin1;
  if (c == "iso885915" || c == "latin9") return Encoding::kLatin9;
  return Encoding::kUnsupported;
}

// ISO-8859-1 maps byte b to U+00b; ISO-8859-15 replaces eight of them (the euro sign, Š š Ž ž
// Œ œ Ÿ).
std::string to_utf8(std::string_view s, Encoding e) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (const char ch : s) {
    uint32_t cp = static_cast<unsigned char>(ch);
    if (e == Encoding::kLatin9) {
      switch (cp) {
        case 0xA4: cp = 0x20AC; break;
        case 0xA6: cp = 0x0160; break;
        case 0xA8: cp = 0x0161; break;
        case 0xB4: cp = 0x017D; break;
        case 0xB8: cp = 0x017E; break;
        case 0xBC: cp = 0x0152; break;
        case 0xBD: cp = 0x0153; break;
        case 0xBE: cp = 0x0178; break;
        default: break;
      }
    }
    append_utf8(out, cp);
  }
  return out;
}

// The numbers and strings of the file, every access checked against its size.
class MoBytes {
 public:
  MoBytes(std::string_view bytes, const std::string& name) : b_(bytes), name_(name) {
    ROSETTA_CHECK(b_.size() >= kHeaderBytes, name_, ": truncated .mo file (", b_.size(),
                  " bytes; the header alone takes ", kHeaderBytes, ")");
    const uint32_t magic = u32_le(0);
    ROSETTA_CHECK(magic == kMagic || magic == kMagicSwapped, name_,
                  ": not a .mo file (magic number ", hex(magic), ", expected ", hex(kMagic), ")");
    swapped_ = magic == kMagicSwapped;
  }

  uint32_t u32(uint64_t offset) const {
    const uint32_t v = u32_le(offset);
    return swapped_ ? __builtin_bswap32(v) : v;
  }

  // String `i` of the table at `table` (N entries of length, offset); `what` names the table.
  std::string_view string(uint64_t table, uint32_t i, const char* what) const {
    const uint32_t len = u32(table + 8 * uint64_t(i));
    const uint32_t off = u32(table + 8 * uint64_t(i) + 4);
    ROSETTA_CHECK(uint64_t(off) + len <= b_.size(), name_, ": ", what, " ", i, " (", len,
                  " bytes at offset ", off, ") runs past the end of the file (", b_.size(),
                  " bytes)");
    return b_.substr(off, len);
  }

  void check_table(uint64_t table, uint32_t n, const char* what) const {
    ROSETTA_CHECK(table + 8 * uint64_t(n) <= b_.size(), name_, ": the table of ", what, " (", n,
                  " entries at offset ", table, ") runs past the end of the file (", b_.size(),
                  " bytes)");
  }

 private:
  uint32_t u32_le(uint64_t offset) const {
    // Callers check tables first; this guard keeps a miscount from ever reading out of bounds.
    ROSETTA_CHECK(offset + 4 <= b_.size(), name_, ": truncated at offset ", offset);
    uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b_[offset + k]);
    return v;
  }

  std::string_view b_;
  const std::string& name_;
  bool swapped_ = false;
};

std::vector<std::string> split_nul(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t p = s.find('\0'); p != std::string_view::npos; p = s.find('\0', start)) {
    parts.emplace_back(s.substr(start, p - start));
    start = p + 1;
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

// A string for an error message: its valid UTF-8 start, at most 60 bytes, on one line.
std::string quoted(std::string_view s) {
  const size_t full = s.size();
  s = s.substr(0, std::min(find_invalid_utf8(s), size_t(60)));
  while (find_invalid_utf8(s) != std::string_view::npos) s.remove_suffix(1);  // a cut character
  std::string out = "\"";
  for (const char c : s) out += (c == '\n' || c == '\0' || c == '\x04') ? ' ' : c;
  return out + (s.size() < full ? "...\"" : "\"");
}

}  // namespace

std::string mo_header_charset(std::string_view header) {
  for (size_t p = header.find("charset="); p != std::string_view::npos;
       p = header.find("charset=", p + 1)) {
    if (p > 0 && header[p - 1] != ' ' && header[p - 1] != ';' && header[p - 1] != '\t') continue;
    const size_t b = p + 8;
    size_t e = b;
    while (e < header.size() && header[e] != '\n' && header[e] != ';' && header[e] != ' ' &&
           header[e] != '\t' && header[e] != '\r')
      ++e;
    return std::string(header.substr(b, e - b));
  }
  return {};
}

MoCatalog parse_mo(std::string_view bytes, const std::string& name) {
  const MoBytes mo(bytes, name);
  const uint32_t revision = mo.u32(4);
  ROSETTA_CHECK(revision >> 16 <= 1, name, ": unsupported .mo revision ", revision >> 16, ".",
                revision & 0xFFFF, " (major revision 0 or 1 expected)");
  const uint32_t n = mo.u32(8);
  const uint32_t originals = mo.u32(12), translations = mo.u32(16);
  mo.check_table(originals, n, "originals");
  mo.check_table(translations, n, "translations");

  MoCatalog cat;
  cat.name = name;
  // The header first: its charset says how to read every other string.
  for (uint32_t i = 0; i < n; ++i)
    if (mo.string(originals, i, "original").empty()) {
      cat.header = std::string(mo.string(translations, i, "translation"));
      break;
    }
  cat.charset = mo_header_charset(cat.header);
  const Encoding enc = encoding_of(cat.charset);
  if (enc == Encoding::kUnsupported) {
    cat.skip_reason = "charset " + cat.charset + " is not supported (UTF-8, ISO-8859-1 and -15 are)";
    cat.header.clear();
    return cat;
  }
  auto decode = [&](std::string_view s, const char* what, std::string_view original) {
    if (enc != Encoding::kUtf8) return to_utf8(s, enc);
    const size_t bad = find_invalid_utf8(s);
    ROSETTA_CHECK(bad == std::string_view::npos, name, ": ", what, " of ",
                  original.empty() ? "the header" : quoted(original),
                  ": invalid UTF-8 at byte ", bad + 1, " (the catalog declares ",
                  cat.charset.empty() ? "no charset" : "charset " + cat.charset, ")");
    return std::string(s);
  };
  cat.header = decode(cat.header, "translation", "");

  cat.entries.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const std::string_view raw_id = mo.string(originals, i, "original");
    if (raw_id.empty()) continue;  // the header
    const std::string id = decode(raw_id, "original", raw_id);
    const std::string str = decode(mo.string(translations, i, "translation"), "translation", raw_id);
    MoEntry e;
    std::string_view rest = id;
    if (const size_t eot = rest.find('\x04'); eot != std::string_view::npos) {
      e.context = std::string(rest.substr(0, eot));
      rest.remove_prefix(eot + 1);
    }
    if (const size_t nul = rest.find('\0'); nul != std::string_view::npos) {
      e.msgid = std::string(rest.substr(0, nul));
      e.msgid_plural = std::string(rest.substr(nul + 1));
    } else {
      e.msgid = std::string(rest);
    }
    e.msgstr = split_nul(str);
    cat.entries.push_back(std::move(e));
  }
  return cat;
}

MoCatalog read_mo(const std::filesystem::path& path) {
  const std::string name = path.string();
  check_regular_file(path);
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  ROSETTA_CHECK(!ec, name, ": cannot read its size (", ec.message(), ")");
  ROSETTA_CHECK(size <= kMaxFileBytes, name, ": ", size, " bytes, over the 256 MiB a .mo file may have");
  std::ifstream in(path, std::ios::binary);
  ROSETTA_CHECK(in.is_open(), name, ": cannot open (", std::strerror(errno), ")");
  std::string bytes(size_t(size), '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  ROSETTA_CHECK(in.gcount() == std::streamsize(bytes.size()), name, ": read failed");
  return parse_mo(bytes, name);
}

}  // namespace rosetta::data
