// The fixtures and checks of the bad-input battery (test_badinput.cpp, test_badinput_cli.cpp):
// snapshots of an output directory that must stay untouched, tiny trained runs to break, and
// the corpora and output directories the cases start from.
#pragma once

#include <nlohmann/json.hpp>

#include <map>

#include "cli_support.h"
#include "rosetta/core/safetensors.h"

namespace {

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::require_error;
using rosetta::test::require_no_crash;
using rosetta::test::run_rosetta;
using rosetta::test::slurp;
using rosetta::test::write_file;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- checks

// The files under `dir` (relative path -> bytes), but a run's lock file: every trainer that
// starts on the run takes the lock and records its PID there, before any check can refuse.
using Snapshot = std::map<std::string, std::string>;
inline Snapshot snapshot(const std::string& dir) {
  Snapshot s;
  if (!fs::is_directory(dir)) return s;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "train.lock")
      s[fs::relative(e.path(), dir).string()] = slurp(e.path().string());
  return s;
}

// Every file of `before` is still in `dir`, byte for byte (files named in `except`, such as a
// log the failed attempt appended to, are only required to still exist).
inline void require_untouched(const Snapshot& before, const std::string& dir,
                              const std::vector<std::string>& except = {}) {
  const Snapshot after = snapshot(dir);
  for (const auto& [name, bytes] : before) {
    INFO(dir << "/" << name);
    REQUIRE(after.count(name) == 1);
    if (std::find(except.begin(), except.end(), name) == except.end()) REQUIRE(after.at(name) == bytes);
  }
}

// ---------------------------------------------------------------- fixtures

// A copy-task model (6 symbols, inputs of at most 16 tokens) after 4 updates: config.toml,
// checkpoint.safetensors, best.safetensors, metrics.jsonl, train.log.
const char* kCopyFlags =
    "--task copy --d-model 16 --heads 2 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
    "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 100 "
    "--copy-valid-size 10 --valid-bleu-sentences 5 --threads 1 --log-every 1 --dropout 0";

inline std::string train_copy(const TempDir& work, const std::string& name, int ff = 32) {
  const std::string dir = work / name;
  const RunResult r = run_rosetta(std::string("train ") + kCopyFlags + " --ff " + std::to_string(ff) +
                                  " --max-steps 4 --validate-every 2 --save-every 2 --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// A toy German->English model (SentencePiece tokenizers) after 3 updates.
const char* kToyFlags =
    "--d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-tokens 256 --threads 1 "
    "--log-every 1 --valid-bleu-sentences 0";

inline std::string toy_tsv(const TempDir& work, unsigned seed = 1) {
  const std::string path = work / ("toy" + std::to_string(seed) + ".tsv");
  rosetta::test::write_tsv(path, rosetta::test::toy_corpus(30, seed));
  return path;
}

inline std::string train_toy(const TempDir& work, const std::string& name, int vocab) {
  const std::string dir = work / name;
  const RunResult r = run_rosetta("train --train " + toy_tsv(work) + " " + kToyFlags + " --vocab-size " +
                                  std::to_string(vocab) + " --max-steps 3 --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// A new output directory that already holds a file of the user's.
inline std::string existing_out(const TempDir& work) {
  static int n = 0;
  const std::string dir = work / ("out" + std::to_string(++n));
  fs::create_directories(dir);
  write_file(dir + "/notes.txt", "keep me\n");
  return dir;
}

// `train --train FILE --out DIR` on a bad corpus: a clean error naming `fragments`, DIR's files
// untouched.
inline void require_bad_corpus(const TempDir& work, const std::string& corpus_flags,
                        const std::vector<std::string>& fragments) {
  const std::string out = existing_out(work);
  const Snapshot before = snapshot(out);
  const RunResult r = run_rosetta("train " + corpus_flags + " " + kToyFlags + " --max-steps 2 --out " + out);
  require_error(r, fragments);
  require_untouched(before, out);
}

inline std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Copies a run directory without best.safetensors, so that the checkpoint is what loads, and
// without the checkpoint before it, so that a resume has nothing to fall back on (the fallback:
// tests/apps/test_faults.cpp).
inline std::string copy_run(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  fs::remove(to + "/best.safetensors");
  fs::remove(to + "/checkpoint.prev.safetensors");
  return to;
}

}  // namespace
