#include "text_io.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"
#include "rosetta/translator/translator.h"

namespace rosetta::cli {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const std::string& path) {
  if (!path.empty() && path != "-") return data::read_lines(path);
  // Read through the descriptor: a stream's rdbuf() copy reports no read error (stdin a
  // directory read as an empty input).
  return data::parse_lines(read_descriptor(STDIN_FILENO, "<stdin>"), "<stdin>");
}

void write_text(const std::string& path, const std::string& text) {
  TextOutput out(path);
  out.write(text);
  out.close();
}

// The names of standard output are written through it: replacing the file /dev/stdout leads to
// (a shell's `> file`) would leave the shell writing to a file no longer there.
TextOutput::TextOutput(const std::string& path) {
  if (!(path.empty() || path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1"))
    file_.emplace(path);
}

void TextOutput::write(std::string_view text) {
  if (file_) file_->write(text);
  else std::cout << text;
}

void TextOutput::flush() {
  if (!file_) check_stdout();
}

void TextOutput::close() {
  if (file_) file_->commit();
  else check_stdout();
}

void check_stdout() {
  errno = 0;
  std::cout.flush();
  ROSETTA_CHECK(std::cout.good(), "<stdout>: write failed",
                errno != 0 ? ": " + std::generic_category().message(errno) : std::string());
}

namespace {
// Why the existing file `p` must not be replaced by an output of `kind`, or "" when it may be.
// A run's own files (what `rosetta train` keeps beside config.toml: its weights, state,
// tokenizers, configuration and logs) are never written over by another command; nor is any
// weights or tokenizer file by a text output (translations, a report, a chart).
std::string protected_reason(const fs::path& given, OutputKind kind) {
  std::error_code ec;
  if (!fs::is_regular_file(given, ec)) return "";
  const fs::path canonical = fs::canonical(given, ec);  // what a link leads to is what gets written
  const fs::path p = ec ? given : canonical;
  const std::string name = p.filename().string();
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (fs::exists(dir / "config.toml", ec)) {
    for (const std::string& k : translator::RunPaths(dir.string()).trainer_files())
      if (fs::path(k).filename() == name) return "a file of the run in " + dir.string() + " (rosetta train's)";
    if (name.starts_with("step-") && name.ends_with(".safetensors")) return "a weights snapshot of the run in " + dir.string();
  }
  if (kind == OutputKind::text && (name.ends_with(".safetensors") || name.ends_with(".model")))
    return "a weights or tokenizer file";
  return "";
}
}  // namespace

void check_output_path(const std::string& path, const std::string& flag, OutputKind kind) {
  if (path.empty() || path == "-") return;
  const fs::path p(path);
  std::error_code ec;
  ROSETTA_CHECK(!fs::is_directory(p, ec), flag, " ", path, " is a directory, expected a file name");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  ROSETTA_CHECK(fs::is_directory(dir, ec), flag, " ", path, ": ", dir.string(),
                fs::exists(dir, ec) ? " is not a directory" : " does not exist");
  const std::string reason = protected_reason(p, kind);
  ROSETTA_CHECK(reason.empty(), flag, " ", path, " is ", reason, ": not written over (give another file name)");
}

}  // namespace rosetta::cli
