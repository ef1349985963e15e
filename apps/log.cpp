#include "log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <cstdio>

namespace rosetta::cli {

bool stderr_is_tty() { return isatty(fileno(stderr)) != 0; }

void setup_logging(const std::string& log_file) {
  std::vector<spdlog::sink_ptr> sinks;
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_pattern("%^[%H:%M:%S] %v%$");
  sinks.push_back(console);
  if (!log_file.empty()) {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/false);
    file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>("rosetta", sinks.begin(), sinks.end());
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void ProgressLine::show(const std::string& text) {
  if (!tty_) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!tty_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace rosetta::cli
