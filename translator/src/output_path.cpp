// Where another command may write its output (translator.h: check_output_path): never over a
// run's own files.
#include <filesystem>
#include <string>
#include <system_error>

#include "rosetta/core/check.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

namespace fs = std::filesystem;

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

}  // namespace rosetta::translator
