// Logging for the CLI: spdlog to stderr (and to a run's train.log), and a one-line progress
// display on terminals. Only apps/ talks to the user.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace rosetta::cli {

// Console logger on stderr; adds a file sink when `log_file` is given (appending).
void setup_logging(const std::string& log_file = "");
bool stderr_is_tty();

// A status line redrawn in place on a terminal (nothing when stderr is not a terminal).
class ProgressLine {
 public:
  ProgressLine() : tty_(stderr_is_tty()) {}
  ~ProgressLine() { clear(); }
  void show(const std::string& text);
  void clear();  // call before logging a line

 private:
  bool tty_;
  bool shown_ = false;
};

// Sentences translated, as a progress line on a terminal (nothing elsewhere): "translated 120 of
// 1059 lines | 85.2 sentences/s | ETA 11 s" (no total and no ETA when the total is unknown, < 0).
// Redrawn at most 5 times a second.
class TranslationProgress {
 public:
  explicit TranslationProgress(int64_t total) : total_(total) {}
  void add(int64_t sentences);
  void clear() { line_.clear(); }

 private:
  ProgressLine line_;
  int64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

}  // namespace rosetta::cli
