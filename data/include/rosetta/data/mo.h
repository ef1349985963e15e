// GNU gettext message catalogs (.mo files), read without libintl.
//
// Layout (every number a 32-bit unsigned integer, in the byte order the magic number reveals):
//
//   offset 0   magic 0x950412de (read as 0xde120495 when the file has the other byte order)
//          4   revision (major << 16 | minor; major 0 or 1)
//          8   N, the number of strings
//         12   O, offset of the table of original strings (N entries of length, offset)
//         16   T, offset of the table of translations (N entries of length, offset)
//         20   hash table size and offset (not used here)
//
// Each string is `length` bytes at `offset`, followed by a NUL not counted in the length. An
// original "ctxt\x04msgid" carries a context; "msgid\0msgid_plural" is a plural entry, whose
// translation holds the forms separated by NULs. The entry with an empty msgid is the header
// ("Content-Type: text/plain; charset=UTF-8\n...").
//
// Revision 1 files may add system-dependent strings (<PRIu64> and the like) in extra tables;
// those are not read. Fuzzy translations never reach a .mo file unless msgfmt was told to keep
// them, and the file does not mark them: what is in the file is taken as translated.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rosetta::data {

struct MoEntry {
  std::string context;              // empty when the original has no "ctxt\x04" prefix
  std::string msgid;                // the original (English), without the context
  std::string msgid_plural;         // empty unless a plural entry
  std::vector<std::string> msgstr;  // the translation; one string per plural form
};

struct MoCatalog {
  std::string name;     // the file, as given
  std::string charset;  // from the header's Content-Type, as written ("" when absent)
  std::string header;   // the header's translation (UTF-8 once converted)
  // Every entry but the header, in file order (msgfmt sorts them by original), all strings in
  // UTF-8. Empty when skip_reason is set.
  std::vector<MoEntry> entries;
  // Non-empty when the catalog's charset is neither UTF-8 nor one converted here (US-ASCII,
  // ISO-8859-1, ISO-8859-15): the reason, for the caller to report ("charset KOI8-R is not
  // supported"). Such a catalog is not an error: it is skipped.
  std::string skip_reason;
};

// Parses the bytes of a .mo file; `name` stands for the file in errors. Throws rosetta::Error,
// one line starting "name: ", for a file shorter than its header, a bad magic number, an unknown
// major revision, a table or string outside the file, and a string that is not valid UTF-8 in a
// catalog that declares UTF-8 (or no charset).
MoCatalog parse_mo(std::string_view bytes, const std::string& name);

// Reads and parses `path` (also an error: a missing file, a directory, a file over 256 MiB).
MoCatalog read_mo(const std::filesystem::path& path);

// The charset named in a header ("Content-Type: text/plain; charset=UTF-8" -> "UTF-8"), or "".
std::string mo_header_charset(std::string_view header);

}  // namespace rosetta::data
