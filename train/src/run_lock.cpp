#include "rosetta/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"

namespace rosetta::train {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// "PID 1234" (", on HOST" when another machine: a shared filesystem) from the owner's lock file.
// The owner writes it just after taking the lock, so an empty file is read again briefly.
std::string describe_owner(int fd) {
  std::string text;
  for (int attempt = 0; attempt < 50 && text.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    char buf[300] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) text.assign(buf, size_t(n));
  }
  const size_t end = text.find('\n');
  if (text.empty() || end == std::string::npos) return "PID unknown";
  const size_t space = text.find(' ');
  const std::string pid = text.substr(0, std::min(space, end));
  const std::string host = space < end ? text.substr(space + 1, end - space - 1) : "";
  return "PID " + pid + (host.empty() || host == host_name() ? "" : ", on " + host);
}

bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// True when `dir` holds exactly one entry, `name`.
bool holds_only(const std::string& dir, const std::string& name) {
  std::error_code ec;
  int entries = 0;
  bool found = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    ++entries;
    found = found || e.path().filename() == name;
  }
  return !ec && entries == 1 && found;
}

}  // namespace

RunLock::RunLock(const std::string& dir, bool create) : dir_(dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (create) {
    created_dir_ = !fs::exists(dir, ec);
    ensure_directory(dir);
  } else if (!fs::is_directory(dir, ec)) {
    return;
  }
  const std::string file = path(dir);
  // A lock on a file that was unlinked after we opened it (by an owner whose new run ended
  // before it began, see ~RunLock) guards nothing: lock again until the path names our file.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    ROSETTA_CHECK(fd >= 0, file, ": cannot open the run directory's lock file: ", errno_text(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string owner = err == EWOULDBLOCK ? describe_owner(fd) : "";
      ::close(fd);
      ROSETTA_CHECK(err == EWOULDBLOCK, file, ": cannot lock: ", errno_text(err));
      ROSETTA_FAIL(dir, " is in use by another rosetta train (", owner, ", holding ", file,
                   "); one trainer per run directory: wait for it to end or stop it, then resume with "
                   "rosetta train --resume ", dir);
    }
    if (same_file(fd, file)) {
      fd_ = fd;
    } else {
      ::close(fd);
      ROSETTA_CHECK(attempt < 100, file, ": the lock file keeps being replaced");
    }
  }
  const std::string owner = std::to_string(::getpid()) + " " + host_name() + "\n";
  // Without the record the lock still holds; a trainer refused then says "PID unknown".
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, owner.data(), owner.size(), 0) != ssize_t(owner.size()))
    warning_ = file + ": cannot record this process in the lock file: " + errno_text(errno);
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Still unlinked under the lock, so that no other trainer locks a file about to vanish.
  if (created_dir_ && holds_only(dir_, fs::path(path(dir_)).filename().string())) {
    ::unlink(path(dir_).c_str());
    ::rmdir(dir_.c_str());
  }
  ::close(fd_);
}

}  // namespace rosetta::train
