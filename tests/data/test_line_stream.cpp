// LineStream: lines as they arrive on a pipe (ready() says whether the next one is there without
// waiting), with read_lines' checks, and the line count of a regular file.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "rosetta/core/check.h"
#include "rosetta/data/line_stream.h"
#include "temp_files.h"

using namespace rosetta::data;
using Catch::Matchers::Contains;

namespace {
// Both ends of a pipe, closed when it goes away.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fd) == 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void write(const std::string& s) { REQUIRE(::write(fd[1], s.data(), s.size()) == ssize_t(s.size())); }
  void close_writer() {
    ::close(fd[1]);
    fd[1] = -1;
  }
};
}  // namespace

TEST_CASE("LineStream: a pipe's lines, ready only once a whole line has arrived", "[data]") {
  Pipe p;
  LineStream in(p.fd[0], "<pipe>");
  CHECK(in.total_lines() == -1);  // a pipe: unknown
  std::string line;
  CHECK_FALSE(in.ready());  // nothing yet: next() would wait
  p.write("\xEF\xBB\xBF" "eins\r\nzw");
  REQUIRE(in.ready());
  REQUIRE(in.next(line));
  CHECK(line == "eins");  // the byte order mark and the CR dropped
  CHECK_FALSE(in.ready());  // "zw" is half a line
  p.write("ei\n\n");
  REQUIRE(in.ready());
  REQUIRE(in.next(line));
  CHECK(line == "zwei");
  REQUIRE(in.ready());
  REQUIRE(in.next(line));
  CHECK(line.empty());
  CHECK_FALSE(in.ready());
  p.write("drei");  // a last line without a newline ends with the input
  CHECK_FALSE(in.ready());
  p.close_writer();
  REQUIRE(in.ready());
  REQUIRE(in.next(line));
  CHECK(line == "drei");
  CHECK(in.ready());
  CHECK_FALSE(in.next(line));
}

TEST_CASE("LineStream: read_lines' checks, naming the line", "[data]") {
  Pipe p;
  LineStream in(p.fd[0], "<stdin>", ReadOptions().max_line_bytes(8));
  p.write("ok\n\xff\n" "123456789\n");
  p.close_writer();
  std::string line;
  REQUIRE(in.next(line));
  CHECK_THROWS_WITH(in.next(line), Contains("<stdin>:2: invalid UTF-8"));
  CHECK_THROWS_WITH(in.next(line), Contains("<stdin>:3: line longer than the limit of 8 bytes"));
}

TEST_CASE("LineStream: a regular file, its lines counted at the start", "[data]") {
  rosetta::test::TempDir d;
  const auto path = d.write("in.txt", "a\nb\n\nc");
  LineStream file(path);
  CHECK(file.total_lines() == 4);
  CHECK(file.name() == path.string());
  std::string line;
  int n = 0;
  for (; file.next(line); ++n) CHECK(file.ready());
  CHECK(n == 4);
  // Standard input redirected from a file: counted from where it is read on.
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::lseek(fd, 2, SEEK_SET) == 2);
  CHECK(LineStream(fd, "<stdin>").total_lines() == 3);
  ::close(fd);
  CHECK(LineStream(d.write("empty.txt", "")).total_lines() == 0);
  CHECK_THROWS_WITH(LineStream(d.path() / "missing.txt"), Contains("missing.txt: no such file"));
}
