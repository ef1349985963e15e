#include "rosetta/core/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "rosetta/core/check.h"

namespace rosetta {

namespace {

// Text of an errno value ("Permission denied"); thread-safe, unlike strerror.
std::string errno_text(int err) { return std::generic_category().message(err); }

// Closes a file descriptor on scope exit unless released.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  // Closes now and reports the error of close() (which may carry a delayed write error).
  int close_checked() {
    const int rc = ::close(fd);
    fd = -1;
    return rc;
  }
};

// The directory holding `path` ("." for a bare file name).
std::string parent_directory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Writes all of `bytes`, retrying on short writes and EINTR. Returns 0 or an errno value.
int write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= size_t(n);
  }
  return 0;
}

}  // namespace

std::string read_file(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ROSETTA_CHECK(f.fd >= 0, path, ": cannot open for reading: ", errno_text(errno));
  struct stat st {};
  ROSETTA_CHECK(::fstat(f.fd, &st) == 0, path, ": cannot stat: ", errno_text(errno));
  ROSETTA_CHECK(!S_ISDIR(st.st_mode), path, ": is a directory, expected a file");
  return read_descriptor(f.fd, path, S_ISREG(st.st_mode) ? size_t(st.st_size) : 0);
}

std::string read_descriptor(int fd, const std::string& name, size_t expected) {
  std::string out;
  out.reserve(expected);
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ROSETTA_FAIL(name, ": read failed after ", out.size(), " bytes: ", errno_text(errno));
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

// What a file that is not a regular one is, for errors ("a FIFO").
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

// Throws unless `st` (of `path`) is a regular file's.
void check_regular(const std::string& path, const struct stat& st) {
  ROSETTA_CHECK(!S_ISDIR(st.st_mode), path, ": is a directory, expected a file");
  ROSETTA_CHECK(S_ISREG(st.st_mode), path, ": not a regular file (", file_kind(st.st_mode), ")");
}

void require_regular_file(const std::string& path) {
  struct stat st {};
  ROSETTA_CHECK(::stat(path.c_str(), &st) == 0, path, ": cannot open for reading: ", errno_text(errno));
  check_regular(path, st);
}

std::string read_regular_file(const std::string& path) {
  require_regular_file(path);
  // Opened without waiting (a FIFO put there since the check would otherwise block the open),
  // then checked again on the descriptor, which is what gets read.
  Fd f(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ROSETTA_CHECK(f.fd >= 0, path, ": cannot open for reading: ", errno_text(errno));
  struct stat st {};
  ROSETTA_CHECK(::fstat(f.fd, &st) == 0, path, ": cannot stat: ", errno_text(errno));
  check_regular(path, st);
  ROSETTA_CHECK(::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK) == 0, path, ": fcntl failed: ",
                errno_text(errno));
  return read_descriptor(f.fd, path, size_t(st.st_size));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFileWriter w(path);
  w.write(bytes);
  w.commit();
}

AtomicFileWriter::AtomicFileWriter(const std::string& path_in) : path_(path_in) {
  ROSETTA_CHECK(!path_in.empty(), "write_file_atomic: empty path");
  std::string path = path_in;
  struct stat st {};
  if (::stat(path_in.c_str(), &st) == 0) {  // exists (a symbolic link: what it points to)
    ROSETTA_CHECK(!S_ISDIR(st.st_mode), path_in, ": is a directory, expected a file");
    if (!S_ISREG(st.st_mode)) {
      // A device, pipe or socket (/dev/stdout, /dev/null, a FIFO) has nothing to replace: renaming
      // a file over it would replace the device itself (as root, even /dev/full). Written in place.
      fd_ = ::open(path_in.c_str(), O_WRONLY | O_CLOEXEC);
      ROSETTA_CHECK(fd_ >= 0, path_in, ": cannot open for writing: ", errno_text(errno));
      return;
    }
    // A link to a regular file: the file it points to is replaced, the link stays.
    std::error_code ec;
    if (std::filesystem::is_symlink(path_in, ec)) {
      const std::filesystem::path target = std::filesystem::canonical(path_in, ec);
      if (!ec) path = target.string();
    }
  }
  path_ = path;
  // A fresh temporary name in the same directory (rename is atomic only within a filesystem).
  // O_EXCL never reuses a leftover from a crashed run; mode 0666 is filtered by the umask.
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  ROSETTA_CHECK(fd_ >= 0, path, ": cannot create temporary file in directory '", parent_directory(path),
                "': ", errno_text(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

// From the first failure on, the temporary file is removed; `path` itself is not touched.
void AtomicFileWriter::fail(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (tmp_.empty()) ROSETTA_FAIL(path_, ": ", what, ": ", errno_text(err));
  ::unlink(tmp_.c_str());
  const std::string tmp = std::exchange(tmp_, "");
  committed_ = true;  // nothing left to remove
  ROSETTA_FAIL(path_, ": ", what, " (temporary file '", tmp, "'): ", errno_text(err));
}

void AtomicFileWriter::write(std::string_view bytes) {
  ROSETTA_CHECK(fd_ >= 0 && !committed_, path_, ": written after it was closed");
  if (int err = write_all(fd_, bytes)) fail("write failed", err);
}

void AtomicFileWriter::commit() {
  ROSETTA_CHECK(fd_ >= 0 && !committed_, path_, ": committed twice");
  if (!tmp_.empty() && ::fsync(fd_) != 0) fail("fsync failed", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("close failed", errno);
  committed_ = true;
  if (!tmp_.empty()) rename_atomic(tmp_, path_);
}

void rename_atomic(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    ::unlink(from.c_str());
    ROSETTA_FAIL(to, ": cannot rename '", from, "' over it: ", errno_text(err));
  }
  // Make the rename itself durable. Some filesystems cannot fsync a directory (EINVAL): the
  // rename has still happened, so that is not an error.
  const std::string dir = parent_directory(to);
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ROSETTA_CHECK(d.fd >= 0, to, ": in place, but cannot open directory '", dir, "' to sync it: ", errno_text(errno));
  if (::fsync(d.fd) != 0 && errno != EINVAL)
    ROSETTA_FAIL(to, ": in place, but fsync of directory '", dir, "' failed: ", errno_text(errno));
}

void ensure_directory(const std::string& path) {
  ROSETTA_CHECK(!path.empty(), "ensure_directory: empty path");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  ROSETTA_CHECK(!ec, path, ": cannot create directory: ", ec.message());
  ROSETTA_CHECK(std::filesystem::is_directory(path, ec), path,
                ": exists but is not a directory");
  ROSETTA_CHECK(::access(path.c_str(), W_OK | X_OK) == 0, path, ": directory is not writable: ",
                errno_text(errno));
}

}  // namespace rosetta
