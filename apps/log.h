// Logging for the CLI: spdlog to stderr (and to a run's train.log), and a one-line progress
// display on terminals. Only apps/ talks to the user.
#pragma once

#include <spdlog/spdlog.h>

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

}  // namespace rosetta::cli
