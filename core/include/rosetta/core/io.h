// File I/O helpers with clear errors: every failure throws rosetta::Error naming the path and
// the reason (e.g. "ckpt/model.safetensors: cannot open for reading: No such file or directory").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rosetta {

// The whole content of a regular file (or anything readable to EOF, such as a pipe).
// Throws when the file is missing, is a directory, or cannot be read.
std::string read_file(const std::string& path);
// The whole content of the regular file `path` (a symbolic link to one is followed), for files
// that must be files: weights, checkpoints, tokenizers. Anything else is refused before a byte
// is read, with one line naming it and what it is ("run/best.safetensors: not a regular file (a
// FIFO)"): opening a FIFO for reading waits for a writer, possibly forever.
std::string read_regular_file(const std::string& path);
// Throws as read_regular_file does unless `path` is a regular file (or a link to one): "PATH:
// cannot open for reading: No such file or directory", "PATH: is a directory, expected a file".
void require_regular_file(const std::string& path);

// Everything left to read on the open descriptor `fd` (standard input, say), `expected` bytes
// reserved; a read error throws, naming `name` ("<stdin>: read failed after 0 bytes: Is a
// directory").
std::string read_descriptor(int fd, const std::string& name, size_t expected = 0);

// Replaces `path` with `bytes` so that a reader sees either the old file or the new one, never a
// mix, even after a crash: writes `path.tmp.<pid>.<n>` in the same directory, fsyncs it, renames
// it over `path`, then fsyncs the directory. On failure the temporary file is removed, the old
// file is left untouched, and the error names `path`. A symbolic link keeps pointing where it
// did: the file it points to is replaced. An existing device, pipe or socket (/dev/stdout, a
// FIFO) is written in place, as there is no file to replace.
void write_file_atomic(const std::string& path, std::string_view bytes);

// A file written piece by piece, then put in place as write_file_atomic puts it: the pieces go
// to a temporary file beside `path`, which commit() fsyncs and renames over `path`. Until then
// `path` is as it was; an object destroyed uncommitted removes its temporary. An existing
// device, pipe or socket is written in place, piece by piece, as write_file_atomic does.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(std::string_view bytes);
  void commit();
  const std::string& path() const { return path_; }

 private:
  void fail(const char* what, int err);
  std::string path_, tmp_;  // tmp_ empty: written in place
  int fd_ = -1;
  bool committed_ = false;
};

// Renames `from` over `to` (atomic within one filesystem: a reader sees the old file or the new
// one), then fsyncs the directory so that the rename survives a crash (skipped where the
// filesystem cannot sync a directory). When the rename fails, `from` is removed, `to` is left
// untouched, and the error names `to`.
void rename_atomic(const std::string& from, const std::string& to);

// Creates `path` and its missing parents (like mkdir -p). Throws when it cannot be created, is
// not a directory, or is not writable.
void ensure_directory(const std::string& path);

}  // namespace rosetta
