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

void TranslationProgress::add(int64_t sentences) {
  done_ += sentences;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count(), rate = double(done_) / seconds;
  std::string text = "translated " + std::to_string(done_) + (total_ >= 0 ? " of " + std::to_string(total_) : "") +
                     " lines | " + fmt::format("{:.1f}", rate) + " sentences/s";
  if (total_ >= done_ && rate > 0) text += fmt::format(" | ETA {:.0f} s", double(total_ - done_) / rate);
  line_.show(text);
}

}  // namespace rosetta::cli
