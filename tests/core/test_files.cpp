// Plain files (read_file, write_file_atomic, AtomicFileWriter, ensure_directory) and the refusal
// of files that are not regular ones. The safetensors format: test_io.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "io_support.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"


TEST_CASE("AtomicFileWriter puts a file written in pieces in place at commit, or leaves the old one", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("out.txt");
  write_plain(path, "old");
  {
    AtomicFileWriter w(path);
    w.write("new ");
    w.write("text");
    CHECK(read_file(path) == "old");  // not before commit
  }
  CHECK(read_file(path) == "old");  // never committed: the temporary removed
  CHECK(dir.listing() == std::vector<std::string>{"out.txt"});
  AtomicFileWriter w(path);
  w.write("new ");
  w.write("text");
  w.commit();
  CHECK(read_file(path) == "new text");
  CHECK(dir.listing() == std::vector<std::string>{"out.txt"});
  REQUIRE_THROWS_WITH(w.write("more"), Contains("written after it was closed"));
}

TEST_CASE("weights that are a FIFO or a device are refused before they are opened", "[io]") {
  ScratchDir dir;
  // Opening a FIFO for reading waits for a writer: were it opened, this test would never end.
  const std::string fifo = dir.file("best.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  REQUIRE_THROWS_WITH(load_safetensors(fifo), Equals(fifo + ": not a regular file (a FIFO)"));
  REQUIRE_THROWS_WITH(read_regular_file(fifo), Equals(fifo + ": not a regular file (a FIFO)"));
  REQUIRE_THROWS_WITH(read_regular_file("/dev/null"), Equals("/dev/null: not a regular file (a character device)"));
  // A link to a regular file is read; a link to a FIFO is not.
  write_plain(dir.file("real"), "bytes");
  std::filesystem::create_symlink(dir.file("real"), dir.file("link"));
  CHECK(read_regular_file(dir.file("link")) == "bytes");
  std::filesystem::create_symlink(fifo, dir.file("fifo_link"));
  REQUIRE_THROWS_WITH(require_regular_file(dir.file("fifo_link")), Contains("not a regular file (a FIFO)"));
  ::unlink(fifo.c_str());
}

// ------------------------------------------------------------------ plain files

TEST_CASE("read_file returns the bytes, including NULs", "[io]") {
  ScratchDir dir;
  const std::string bytes = std::string("a\0b\n", 4) + std::string(200000, 'x');
  write_plain(dir.file("f"), bytes);
  CHECK(read_file(dir.file("f")) == bytes);
  write_plain(dir.file("empty"), "");
  CHECK(read_file(dir.file("empty")).empty());
}

TEST_CASE("write_file_atomic replaces the file and leaves no temporary file", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("out.bin");
  write_file_atomic(path, "first");
  CHECK(read_file(path) == "first");
  write_file_atomic(path, std::string("second\0", 7));
  CHECK(read_file(path) == std::string("second\0", 7));
  write_file_atomic(path, "");
  CHECK(read_file(path).empty());
  CHECK(dir.listing() == std::vector<std::string>{"out.bin"});

  // A bare file name writes into the current directory (parent path ".").
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path);
  write_file_atomic("bare.txt", "x");
  fs::current_path(cwd);
  CHECK(read_file(dir.file("bare.txt")) == "x");
}

TEST_CASE("write_file_atomic writes a pipe in place and replaces what a link points to", "[io]") {
  ScratchDir dir;
  // A FIFO (as /dev/stdout or a device): renaming a file over it would replace the pipe itself.
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader, so opening to write succeeds
  REQUIRE(reader >= 0);
  write_file_atomic(fifo, "through the pipe");
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  CHECK(std::string(buf, size_t(std::max<ssize_t>(n, 0))) == "through the pipe");
  CHECK(fs::is_fifo(fifo));
  CHECK(dir.listing() == std::vector<std::string>{"pipe"});

  // A symbolic link to a file: the file gets the bytes, the link stays a link.
  write_file_atomic(dir.file("target.txt"), "old");
  fs::create_symlink("target.txt", dir.file("link.txt"));
  write_file_atomic(dir.file("link.txt"), "new");
  CHECK(fs::is_symlink(dir.file("link.txt")));
  CHECK(read_file(dir.file("target.txt")) == "new");
  REQUIRE_THROWS_WITH(write_file_atomic(dir.path.string(), "x"), Catch::Contains("is a directory"));
}

TEST_CASE("write_file_atomic failures throw, name the path and leave nothing behind", "[io]") {
  ScratchDir dir;

  SECTION("parent directory does not exist") {
    const std::string path = dir.file("missing/out.bin");
    REQUIRE_THROWS_AS(write_file_atomic(path, "data"), Error);
    REQUIRE_THROWS_WITH(write_file_atomic(path, "data"),
                        StartsWith(path + ": cannot create temporary file") &&
                            Contains("No such file or directory"));
    CHECK(dir.listing().empty());
  }

  SECTION("target is a directory") {
    fs::create_directory(dir.path / "target");
    const std::string path = dir.file("target");
    REQUIRE_THROWS_WITH(write_file_atomic(path, "data"), Catch::Equals(path + ": is a directory, expected a file"));
    CHECK(dir.listing() == std::vector<std::string>{"target"});  // no temporary file
    CHECK(fs::is_directory(path));
  }

  SECTION("directory not writable keeps the old file") {
    const std::string path = dir.file("keep.bin");
    write_file_atomic(path, "old");
    fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
    if (::geteuid() == 0) {
      // Root ignores permissions; the missing-parent section covers the failure path.
      WARN("running as root: skipping the read-only directory check");
    } else {
      REQUIRE_THROWS_WITH(write_file_atomic(path, "new"),
                          StartsWith(path + ": cannot create temporary file") &&
                              Contains("Permission denied"));
      CHECK(read_file(path) == "old");
    }
    fs::permissions(dir.path, fs::perms::owner_all);
    CHECK(dir.listing() == std::vector<std::string>{"keep.bin"});
    CHECK(read_file(path) == "old");
  }
}

TEST_CASE("read_file and ensure_directory errors name the path", "[io]") {
  ScratchDir dir;
  REQUIRE_THROWS_AS(read_file(dir.file("nope")), Error);
  REQUIRE_THROWS_WITH(read_file(dir.file("nope")),
                      Contains(dir.file("nope") + ": cannot open for reading: No such file"));
  REQUIRE_THROWS_WITH(read_file(dir.path.string()), Contains(": is a directory"));

  const std::string nested = dir.file("a/b/c");
  ensure_directory(nested);
  CHECK(fs::is_directory(nested));
  ensure_directory(nested);  // existing: fine

  write_plain(dir.file("plain"), "x");
  REQUIRE_THROWS_AS(ensure_directory(dir.file("plain")), Error);
  REQUIRE_THROWS_WITH(ensure_directory(dir.file("plain")), StartsWith(dir.file("plain") + ": "));
  REQUIRE_THROWS_WITH(ensure_directory(dir.file("plain/sub")),
                      StartsWith(dir.file("plain/sub") + ": cannot create directory"));
}
