#include "rosetta/data/line_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "line_reader.h"

namespace rosetta::data {

namespace {
// Lines in the bytes of the regular file open as `fd` from byte `from` on (a last line without
// '\n' counted), read with pread: the descriptor's offset stays where it is.
int64_t count_lines(int fd, off_t from) {
  char buf[1 << 16];
  int64_t lines = 0;
  char last = '\n';
  for (off_t at = from;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // an error shows when the lines are read
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    last = buf[n - 1];
    at += n;
  }
  return lines + (last != '\n');
}

int64_t regular_file_lines(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  const off_t at = ::lseek(fd, 0, SEEK_CUR);
  return at < 0 ? -1 : count_lines(fd, at);
}
}  // namespace

LineStream::LineStream(int fd, std::string name, const ReadOptions& options)
    : reader_(std::make_unique<LineReader>(fd, std::move(name), options.max_line_bytes_)),
      total_(regular_file_lines(fd)) {}

LineStream::LineStream(const std::filesystem::path& path, const ReadOptions& options)
    : reader_(std::make_unique<LineReader>(path, options.max_line_bytes_)) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // LineReader checked: a regular file
  if (fd >= 0) {
    total_ = regular_file_lines(fd);
    ::close(fd);
  }
}

LineStream::~LineStream() = default;
LineStream::LineStream(LineStream&&) noexcept = default;
LineStream& LineStream::operator=(LineStream&&) noexcept = default;

bool LineStream::next(std::string& line) {
  if (!reader_->next(line)) return false;
  check_text(line, reader_->name(), reader_->line_number());
  return true;
}

bool LineStream::ready() { return reader_->ready(); }

const std::string& LineStream::name() const { return reader_->name(); }

}  // namespace rosetta::data
