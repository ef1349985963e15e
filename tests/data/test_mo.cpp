// The .mo reader: both byte orders, context, plural forms, the header's charset (UTF-8 checked,
// ISO-8859-1/-15 converted, others skipped), and errors naming the file for truncated or
// malformed catalogs, never a crash.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "mo_bytes.h"
#include "rosetta/core/check.h"
#include "rosetta/data/mo.h"
#include "temp_files.h"

using namespace rosetta::data;
using rosetta::test::header_with;
using rosetta::test::kUtf8Header;
using rosetta::test::mo_bytes;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Strings = std::vector<std::string>;

namespace {

// A catalog as msgfmt writes it: the header first (empty original), then sorted originals.
const std::vector<std::pair<std::string, std::string>> kEntries = {
    {"", kUtf8Header},
    {"%d file\0%d files", std::string("%d Datei\0%d Dateien", 19)},
    {"File not found", "Datei nicht gefunden"},
    {"menu\x04Open", "Öffnen"},
};

std::vector<std::pair<std::string, std::string>> with_nuls() {
  // std::string literals above stop at the first NUL; spell the plural entry out.
  auto e = kEntries;
  e[1].first = std::string("%d file\0%d files", 16);
  return e;
}

}  // namespace

TEST_CASE("mo: entries, context and plural forms in both byte orders", "[data]") {
  for (const bool big_endian : {false, true}) {
    INFO("big endian: " << big_endian);
    const MoCatalog c = parse_mo(mo_bytes(with_nuls(), big_endian), "de.mo");
    CHECK(c.name == "de.mo");
    CHECK(c.charset == "UTF-8");
    CHECK(c.skip_reason.empty());
    CHECK_THAT(c.header, StartsWith("Project-Id-Version: demo 1.0"));
    REQUIRE(c.entries.size() == 3);  // the header is not an entry

    CHECK(c.entries[0].msgid == "%d file");
    CHECK(c.entries[0].msgid_plural == "%d files");
    CHECK(c.entries[0].msgstr == Strings{"%d Datei", "%d Dateien"});
    CHECK(c.entries[0].context.empty());

    CHECK(c.entries[1].msgid == "File not found");
    CHECK(c.entries[1].msgid_plural.empty());
    CHECK(c.entries[1].msgstr == Strings{"Datei nicht gefunden"});

    CHECK(c.entries[2].context == "menu");
    CHECK(c.entries[2].msgid == "Open");
    CHECK(c.entries[2].msgstr == Strings{"Öffnen"});
  }
}

TEST_CASE("mo: the header's charset", "[data]") {
  CHECK(mo_header_charset(kUtf8Header) == "UTF-8");
  CHECK(mo_header_charset("Content-Type: text/plain; charset=iso-8859-1\n") == "iso-8859-1");
  CHECK(mo_header_charset("Content-Type: text/plain;charset=utf-8") == "utf-8");
  CHECK(mo_header_charset("Language: de\n").empty());

  // ISO-8859-1 and -15 become UTF-8, the header too.
  const MoCatalog latin1 = parse_mo(
      mo_bytes({{"", header_with("ISO-8859-1") + "Last-Translator: J\xFCrgen\n"},
                {"Size", "Gr\xF6\xDF" "e"}}),
      "latin1.mo");
  CHECK(latin1.charset == "ISO-8859-1");
  REQUIRE(latin1.entries.size() == 1);
  CHECK(latin1.entries[0].msgstr == Strings{"Größe"});
  CHECK_THAT(latin1.header, Contains("Jürgen"));
  const MoCatalog latin9 =
      parse_mo(mo_bytes({{"", header_with("latin9")}, {"Price", "Preis in \xA4"}}), "l9.mo");
  CHECK(latin9.entries.at(0).msgstr == Strings{"Preis in €"});

  // Another charset: no entries, and a reason to report.
  const MoCatalog koi8 = parse_mo(
      mo_bytes({{"", header_with("KOI8-R")}, {"File", "\xE6\xC1\xCA\xCC"}}), "ru.mo");
  CHECK(koi8.entries.empty());
  CHECK_THAT(koi8.skip_reason, Contains("charset KOI8-R is not supported"));

  // No header at all: taken as UTF-8.
  const MoCatalog bare = parse_mo(mo_bytes({{"Yes", "Ja"}}), "bare.mo");
  CHECK(bare.charset.empty());
  CHECK(bare.entries.at(0).msgstr == Strings{"Ja"});
}

TEST_CASE("mo: malformed catalogs are errors naming the file", "[data]") {
  const std::string good = mo_bytes(with_nuls());
  CHECK_THROWS_WITH(parse_mo(good.substr(0, 12), "short.mo"),
                    StartsWith("short.mo: truncated .mo file (12 bytes"));
  CHECK_THROWS_WITH(parse_mo(good.substr(0, good.size() - 5), "cut.mo"),
                    StartsWith("cut.mo: translation 3 (") && Contains("runs past the end of the file"));
  CHECK_THROWS_WITH(parse_mo(mo_bytes(kEntries, false, 0x12345678), "magic.mo"),
                    Contains("magic.mo: not a .mo file (magic number 0x12345678"));
  CHECK_THROWS_WITH(parse_mo("this is not a catalog, just text", "text.mo"),
                    StartsWith("text.mo: not a .mo file"));
  CHECK_THROWS_WITH(parse_mo(mo_bytes(kEntries, false, 0x950412de, 2u << 16), "rev.mo"),
                    Contains("rev.mo: unsupported .mo revision 2.0"));
  // A revision 1 file (system-dependent strings) reads its static tables as usual.
  CHECK(parse_mo(mo_bytes(with_nuls(), false, 0x950412de, 1u << 16), "r1.mo").entries.size() == 3);

  // A table or a string offset outside the file.
  std::string bad_table = good;
  bad_table[17] = char(0xF0);  // offset of the translations table (little endian) + 0xF000
  CHECK_THROWS_WITH(parse_mo(bad_table, "table.mo"),
                    Contains("table.mo: the table of translations (4 entries at offset"));
  std::string bad_offset = good;
  bad_offset[28 + 8 * 2 + 7] = char(0x7F);  // high byte of the offset of original 2
  CHECK_THROWS_WITH(parse_mo(bad_offset, "off.mo"), Contains("off.mo: original 2 ("));

  // Invalid UTF-8 in a catalog that declares UTF-8 names the entry.
  CHECK_THROWS_WITH(parse_mo(mo_bytes({{"", kUtf8Header}, {"Size", "Gr\xF6\xDF" "e"}}), "u.mo"),
                    Contains("u.mo: translation of \"Size\": invalid UTF-8 at byte 3"));
  CHECK_THROWS_WITH(parse_mo(mo_bytes({{"", header_with("UTF-8") + "Last-Translator: J\xFCrgen\n"}}), "h.mo"),
                    Contains("h.mo: translation of the header: invalid UTF-8"));
}

TEST_CASE("mo: no prefix or flipped byte makes the reader crash", "[data]") {
  // Every prefix and every single-byte corruption either parses or throws rosetta::Error.
  const std::string good = mo_bytes(with_nuls(), true);
  for (size_t n = 0; n <= good.size(); ++n) {
    try {
      parse_mo(good.substr(0, n), "p.mo");
    } catch (const rosetta::Error&) {
    }
  }
  for (size_t i = 0; i < good.size(); ++i)
    for (const unsigned char v : {0x00, 0x7F, 0x80, 0xFF}) {
      std::string b = good;
      b[i] = char(v);
      try {
        parse_mo(b, "f.mo");
      } catch (const rosetta::Error&) {
      }
    }
}

TEST_CASE("mo: read_mo reads a file and names it in errors", "[data]") {
  rosetta::test::TempDir dir;
  const auto path = dir.write("coreutils.mo", mo_bytes(with_nuls()));
  const MoCatalog c = read_mo(path);
  CHECK(c.name == path.string());
  CHECK(c.entries.size() == 3);
  CHECK_THROWS_WITH(read_mo(dir.path() / "missing.mo"), Contains("missing.mo: no such file"));
  CHECK_THROWS_WITH(read_mo(dir.path()), Contains("is a directory"));
  const auto empty = dir.write("empty.mo", "");
  CHECK_THROWS_WITH(read_mo(empty), Contains("empty.mo: truncated .mo file (0 bytes"));
}
