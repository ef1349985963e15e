// LineReader and the UTF-8 checks shared by the corpus readers and the tokenizer.
#include "line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "rosetta/core/check.h"

namespace rosetta::data {

void check_regular_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  ROSETTA_CHECK(st.type() != std::filesystem::file_type::not_found, path.string(),
                ": no such file");
  ROSETTA_CHECK(!ec, path.string(), ": cannot access (", ec.message(), ")");
  ROSETTA_CHECK(st.type() != std::filesystem::file_type::directory, path.string(),
                ": is a directory, expected a file");
  ROSETTA_CHECK(st.type() == std::filesystem::file_type::regular, path.string(),
                ": not a regular file");
}

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i < n && p[i] >= lo && p[i] <= hi;
  };
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    size_t len = 0;
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = cont(i + 1) ? 2 : 0;
    else if (c == 0xE0) len = cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0;            // no overlong
    else if (c == 0xED) len = cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;      // no surrogate
    else if (c >= 0xE1 && c <= 0xEF) len = cont(i + 1) && cont(i + 2) ? 3 : 0;
    else if (c == 0xF0) len = cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    else if (c >= 0xF1 && c <= 0xF3) len = cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    else if (c == 0xF4) len = cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void check_text(std::string_view s, const std::string& file, size_t line) {
  const size_t nul = s.find('\0');
  ROSETTA_CHECK(nul == std::string_view::npos, file, ":", line, ": NUL byte at byte ", nul + 1);
  const size_t bad = find_invalid_utf8(s);
  ROSETTA_CHECK(bad == std::string_view::npos, file, ":", line, ": invalid UTF-8 at byte ",
                bad + 1);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  for (size_t p = s.find(from); p != std::string_view::npos; p = s.find(from, start)) {
    out.append(s.substr(start, p - start)).append(to);
    start = p + from.size();
  }
  return out.append(s.substr(start));
}

std::string ascii_apostrophes(std::string_view s) {
  return replace_all(replace_all(s, "\xE2\x80\x99", "'"), "\xE2\x80\x98", "'");  // ’ ‘
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

LineReader::LineReader(const std::filesystem::path& path, size_t max_line_bytes)
    : name_(path.string()), max_line_bytes_(max_line_bytes), buf_(size_t(1) << 16) {
  ROSETTA_CHECK(max_line_bytes > 0, "LineReader: max_line_bytes must be positive");
  check_regular_file(path);
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  ROSETTA_CHECK(file->is_open(), name_, ": cannot open (", std::strerror(errno), ")");
  in_ = std::move(file);
}

LineReader::LineReader(std::string_view text, std::string name, size_t max_line_bytes, size_t chunk_bytes)
    : in_(std::make_unique<std::istringstream>(std::string(text), std::ios::binary)),
      name_(std::move(name)),
      max_line_bytes_(max_line_bytes),
      buf_(chunk_bytes) {
  ROSETTA_CHECK(max_line_bytes > 0 && chunk_bytes > 0, "LineReader: limits must be positive");
}

LineReader::LineReader(int fd, std::string name, size_t max_line_bytes)
    : fd_(fd), name_(std::move(name)), max_line_bytes_(max_line_bytes), buf_(size_t(1) << 16) {
  ROSETTA_CHECK(max_line_bytes > 0, "LineReader: max_line_bytes must be positive");
}

size_t LineReader::read_some(char* at, size_t room) {
  for (;;) {
    const ssize_t n = ::read(fd_, at, room);
    if (n >= 0) return size_t(n);
    ROSETTA_CHECK(errno == EINTR, name_, ": read failed after line ", line_, ": ", std::strerror(errno));
  }
}

bool LineReader::ready() {
  for (;;) {
    if (eof_ || std::memchr(buf_.data() + pos_, '\n', end_ - pos_)) return true;
    // A stream (in memory, on disk) never waits; nor does next() on a line longer than the buffer.
    if (in_ || end_ - pos_ == buf_.size()) return true;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 0);
    if (r == 0) return false;
    if (r < 0 && errno == EINTR) continue;
    // Readable, at its end or failed: one read says which, without waiting.
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    const size_t n = read_some(buf_.data() + end_, buf_.size() - end_);
    if (n == 0) eof_ = true;
    end_ += n;
  }
}

bool LineReader::fill() {
  if (eof_) return false;
  if (!in_) {  // a descriptor: a short read is what has arrived so far, only 0 is the end
    pos_ = 0;
    end_ = read_some(buf_.data(), buf_.size());
    eof_ = end_ == 0;
    return end_ > 0;
  }
  in_->read(buf_.data(), std::streamsize(buf_.size()));
  ROSETTA_CHECK(!in_->bad(), name_, ":", line_ + 1, ": read error");
  pos_ = 0;
  end_ = size_t(in_->gcount());
  if (end_ < buf_.size()) eof_ = true;
  return end_ > 0;
}

bool LineReader::next(std::string& line) {
  line.clear();
  bool any = false;  // saw at least one byte (or the newline) of this line
  for (;;) {
    if (pos_ == end_ && !fill()) break;
    const char* b = buf_.data() + pos_;
    const char* e = buf_.data() + end_;
    const char* nl = static_cast<const char*>(std::memchr(b, '\n', size_t(e - b)));
    const size_t take = size_t((nl ? nl : e) - b);
    // The limit counts the line's bytes without its line ending and, on line 1, without a byte
    // order mark: this early check (a line is never read whole before it is refused) allows
    // for both, the exact one follows.
    const size_t slack = line_ == 0 ? 4 : 1;
    ROSETTA_CHECK(line.size() + take <= max_line_bytes_ + slack, name_, ":", line_ + 1,
                  ": line longer than the limit of ", max_line_bytes_, " bytes");
    line.append(b, take);
    any = true;
    if (nl) {
      pos_ += take + 1;
      break;
    }
    pos_ = end_;
  }
  if (!any) return false;
  ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
  ROSETTA_CHECK(line.size() <= max_line_bytes_, name_, ":", line_,
                ": line longer than the limit of ", max_line_bytes_, " bytes");
  return true;
}

}  // namespace rosetta::data
