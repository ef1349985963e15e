// Bad input gets a clear error, never a crash: every case runs the real rosetta binary on one
// kind of bad input and checks that it exits non-zero with exactly one readable line
// "rosetta: error: ..." naming the file, line or value (no crash, abort, stack trace or sanitizer
// report), and that files already in the output directory are left as they were.
// Tagged [badinput]; tiny models (a few updates of a 16-wide Transformer), so the battery
// takes seconds.
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
Snapshot snapshot(const std::string& dir) {
  Snapshot s;
  if (!fs::is_directory(dir)) return s;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "train.lock")
      s[fs::relative(e.path(), dir).string()] = slurp(e.path().string());
  return s;
}

// Every file of `before` is still in `dir`, byte for byte (files named in `except`, such as a
// log the failed attempt appended to, are only required to still exist).
void require_untouched(const Snapshot& before, const std::string& dir, const std::vector<std::string>& except = {}) {
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

std::string train_copy(const TempDir& work, const std::string& name, int ff = 32) {
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

std::string toy_tsv(const TempDir& work, unsigned seed = 1) {
  const std::string path = work / ("toy" + std::to_string(seed) + ".tsv");
  rosetta::test::write_tsv(path, rosetta::test::toy_corpus(30, seed));
  return path;
}

std::string train_toy(const TempDir& work, const std::string& name, int vocab) {
  const std::string dir = work / name;
  const RunResult r = run_rosetta("train --train " + toy_tsv(work) + " " + kToyFlags + " --vocab-size " +
                                  std::to_string(vocab) + " --max-steps 3 --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// A new output directory that already holds a file of the user's.
std::string existing_out(const TempDir& work) {
  static int n = 0;
  const std::string dir = work / ("out" + std::to_string(++n));
  fs::create_directories(dir);
  write_file(dir + "/notes.txt", "keep me\n");
  return dir;
}

// `train --train FILE --out DIR` on a bad corpus: a clean error naming `fragments`, DIR's files
// untouched.
void require_bad_corpus(const TempDir& work, const std::string& corpus_flags,
                        const std::vector<std::string>& fragments) {
  const std::string out = existing_out(work);
  const Snapshot before = snapshot(out);
  const RunResult r = run_rosetta("train " + corpus_flags + " " + kToyFlags + " --max-steps 2 --out " + out);
  require_error(r, fragments);
  require_untouched(before, out);
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Copies a run directory without best.safetensors, so that the checkpoint is what loads, and
// without the checkpoint before it, so that a resume has nothing to fall back on (the fallback:
// tests/apps/test_faults.cpp).
std::string copy_run(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  fs::remove(to + "/best.safetensors");
  fs::remove(to + "/checkpoint.prev.safetensors");
  return to;
}

}  // namespace

// ---------------------------------------------------------------- corpora

TEST_CASE("bad input: a missing corpus file is named", "[badinput]") {
  TempDir work("bad_missing");
  require_bad_corpus(work, "--train " + (work / "nope.tsv"), {"nope.tsv", "no such file"});
  require_bad_corpus(work, "--src " + toy_tsv(work) + " --tgt " + (work / "nope.en"), {"nope.en", "no such file"});
}

TEST_CASE("bad input: a directory where a file is expected", "[badinput]") {
  TempDir work("bad_dir");
  fs::create_directories(work / "corpus.tsv");
  require_bad_corpus(work, "--train " + (work / "corpus.tsv"), {"corpus.tsv", "is a directory"});
  // translate --input, and --config, too.
  const std::string run = train_copy(work, "run");
  require_error(run_rosetta("translate --model " + run + " --input " + (work / "corpus.tsv")), {"corpus.tsv"});
  require_error(run_rosetta("train --task copy --config " + (work / "corpus.tsv") + " --out " + (work / "r")),
                {"corpus.tsv", "not a readable file"});
  REQUIRE_FALSE(fs::exists(work / "r"));
}

TEST_CASE("bad input: an empty corpus", "[badinput]") {
  TempDir work("bad_empty");
  write_file(work / "empty.tsv", "");
  require_bad_corpus(work, "--train " + (work / "empty.tsv"), {"empty.tsv", "no usable sentence pairs"});
  write_file(work / "blank.tsv", "\n  \t \n\n");
  require_bad_corpus(work, "--train " + (work / "blank.tsv"), {"blank.tsv", "no usable sentence pairs"});
}

TEST_CASE("bad input: source and target files with different line counts", "[badinput]") {
  TempDir work("bad_lines");
  write_file(work / "train.de", "der Hund\ndie Katze\nder Mann\n");
  write_file(work / "train.en", "the dog\nthe cat\n");
  require_bad_corpus(work, "--src " + (work / "train.de") + " --tgt " + (work / "train.en"),
                     {"train.de:3", "no matching line in", "train.en"});
}

TEST_CASE("bad input: invalid UTF-8", "[badinput]") {
  TempDir work("bad_utf8");
  write_file(work / "train.tsv", "der Hund\tthe dog\ndie Katze\tthe \xC3\x28 cat\n");
  require_bad_corpus(work, "--train " + (work / "train.tsv"), {"train.tsv:2", "invalid UTF-8 at byte 15"});
  const std::string run = train_copy(work, "run");
  require_error(run_rosetta("translate --model " + run, "1 2\n3 \xFF 4\n"), {"<stdin>:2", "invalid UTF-8 at byte 3"});
}

TEST_CASE("bad input: a NUL byte", "[badinput]") {
  TempDir work("bad_nul");
  write_file(work / "train.tsv", std::string("der Hund\tthe dog\ndie Ka\0tze\tthe cat\n", 33));
  require_bad_corpus(work, "--train " + (work / "train.tsv"), {"train.tsv:2", "NUL byte at byte 7"});
  const std::string run = train_copy(work, "run");
  require_error(run_rosetta("translate --model " + run, std::string("1 2\0 3\n", 7)), {"<stdin>:1", "NUL byte"});
}

TEST_CASE("bad input: a 10 MB line", "[badinput]") {
  TempDir work("bad_long");
  const std::string huge = repeat("Hund ", 2'000'000);  // 10 MB
  write_file(work / "train.tsv", "der Hund\tthe dog\n" + huge + "\tthe dog\n");
  require_bad_corpus(work, "--train " + (work / "train.tsv"), {"train.tsv:2", "line longer than the limit"});
  const std::string run = train_copy(work, "run");
  write_file(work / "in.txt", "1 2\n" + huge + "\n");
  const std::string out = existing_out(work);
  write_file(out + "/out.txt", "old translations\n");
  const Snapshot before = snapshot(out);
  require_error(run_rosetta("translate --model " + run + " --input " + (work / "in.txt") + " --output " + out +
                            "/out.txt"),
                {"in.txt:2", "line longer than the limit"});
  require_untouched(before, out);
}

TEST_CASE("bad input: a binary file as corpus", "[badinput]") {
  TempDir work("bad_binary");
  require_bad_corpus(work, "--train " + std::string(ROSETTA_BIN), {ROSETTA_BIN ":1"});
  require_bad_corpus(work, "--src " + std::string(ROSETTA_BIN) + " --tgt " + std::string(ROSETTA_BIN),
                     {ROSETTA_BIN ":1"});
}

// The trainer reads and checks its data (and trains its tokenizers) before it creates the run
// directory or writes anything there.
TEST_CASE("bad input: a run that fails on its data leaves no run directory behind", "[badinput]") {
  TempDir work("bad_debris");
  write_file(work / "empty.tsv", "");
  require_error(run_rosetta("train --train " + (work / "empty.tsv") + " " + kToyFlags + " --out " + (work / "run")),
                {"empty.tsv"});
  REQUIRE_FALSE(fs::exists(work / "run"));
  // Every pair longer than the length limits.
  require_error(run_rosetta("train --train " + toy_tsv(work) + " " + kToyFlags + " --max-src-len 2 --out " +
                            (work / "run")),
                {"no training pairs left", "--max-src-len 2"});
  REQUIRE_FALSE(fs::exists(work / "run"));
}

// ---------------------------------------------------------------- checkpoints

TEST_CASE("bad input: a truncated checkpoint", "[badinput]") {
  TempDir work("bad_trunc");
  const std::string run = copy_run(train_copy(work, "good"), work / "run");
  const std::string ckpt = run + "/checkpoint.safetensors";
  const std::string bytes = slurp(ckpt);
  for (size_t keep : {size_t(5), size_t(200), bytes.size() / 2, bytes.size() - 1}) {
    INFO("kept " << keep << " of " << bytes.size() << " bytes");
    write_file(ckpt, bytes.substr(0, keep));
    const Snapshot before = snapshot(run);
    require_error(run_rosetta("translate --model " + run, "1 2 3\n"), {"checkpoint.safetensors"});
    require_error(run_rosetta("train --resume " + run + " --max-steps 6"), {"checkpoint.safetensors"});
    require_untouched(before, run, {"train.log"});
  }
}

TEST_CASE("bad input: a checkpoint with flipped bytes in its header", "[badinput]") {
  TempDir work("bad_header");
  const std::string run = copy_run(train_copy(work, "good"), work / "run");
  const std::string ckpt = run + "/checkpoint.safetensors";
  const std::string good = slurp(ckpt);
  for (size_t at : {size_t(2), size_t(11), size_t(30)}) {  // the length prefix, then the JSON
    INFO("flipped byte " << at);
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0xFF);
    write_file(ckpt, bad);
    const Snapshot before = snapshot(run);
    require_error(run_rosetta("translate --model " + run, "1 2 3\n"), {"checkpoint.safetensors"});
    require_error(run_rosetta("train --resume " + run + " --max-steps 6"), {"checkpoint.safetensors"});
    require_untouched(before, run, {"train.log"});
  }
}

// Checkpoints record a checksum of their tensors (rosetta.checksum), which every loader verifies:
// flipped data bytes would otherwise load as silently wrong weights.
TEST_CASE("bad input: a checkpoint with flipped bytes in its data", "[badinput]") {
  TempDir work("bad_data");
  const std::string run = copy_run(train_copy(work, "good"), work / "run");
  const std::string ckpt = run + "/checkpoint.safetensors";
  std::string bytes = slurp(ckpt);
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  for (size_t at = 8 + header + 5; at < bytes.size(); at += 997) bytes[at] = char(bytes[at] ^ 0x5A);
  write_file(ckpt, bytes);
  const Snapshot before = snapshot(run);
  require_error(run_rosetta("translate --model " + run, "1 2 3\n"), {"checkpoint.safetensors", "corrupted"});
  require_error(run_rosetta("train --resume " + run + " --max-steps 6"), {"checkpoint.safetensors", "corrupted"});
  require_untouched(before, run, {"train.log"});
}

TEST_CASE("bad input: a checkpoint whose weights do not match its metadata's architecture", "[badinput]") {
  TempDir work("bad_arch");
  const std::string narrow = train_copy(work, "narrow");
  const std::string wide = train_copy(work, "wide", 48);
  // wide's weights (ff 48) under narrow's metadata (ff 32), in narrow's run directory.
  const std::string run = copy_run(narrow, work / "run");
  rosetta::SafeTensors w = rosetta::load_safetensors(wide + "/checkpoint.safetensors");
  rosetta::SafeTensors n = rosetta::load_safetensors(narrow + "/checkpoint.safetensors");
  n.metadata.erase("rosetta.checksum");  // as a file written by another tool would be (else: "corrupted")
  rosetta::save_safetensors(run + "/checkpoint.safetensors", w.tensors, n.metadata);
  const Snapshot before = snapshot(run);
  require_error(run_rosetta("translate --model " + run, "1 2 3\n"), {"checkpoint.safetensors", "shape"});
  require_error(run_rosetta("train --resume " + run + " --max-steps 6"), {"checkpoint.safetensors", "shape"});
  require_untouched(before, run, {"train.log"});
}

TEST_CASE("bad input: tokenizer files swapped in from another run", "[badinput]") {
  TempDir work("bad_vocab");
  const std::string a = train_toy(work, "a", 50), b = train_toy(work, "b", 70);
  for (const char* f : {"src.model", "tgt.model"})
    fs::copy_file(b + "/" + f, a + "/" + f, fs::copy_options::overwrite_existing);
  const Snapshot before = snapshot(a);
  require_error(run_rosetta("translate --model " + a, "der Hund sieht den Ball.\n"),
                {"vocabularies (50, 50)", "do not match the tokenizers", "(70, 70)"});
  require_error(run_rosetta("train --resume " + a + " --max-steps 6"), {"checkpoint.safetensors"});
  require_untouched(before, a, {"train.log"});
}

// Same vocabulary size, different pieces: only the checksums the checkpoints record tell.
TEST_CASE("bad input: tokenizer files of the same size swapped in from another run", "[badinput]") {
  TempDir work("bad_vocab_same");
  const std::string a = train_toy(work, "a", 50);
  const std::string b = work / "b";
  const RunResult r = run_rosetta("train --train " + toy_tsv(work, 2) + " " + kToyFlags +
                                  " --vocab-size 50 --max-steps 1 --out " + b);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(slurp(a + "/src.model") != slurp(b + "/src.model"));
  for (const char* f : {"src.model", "tgt.model"})
    fs::copy_file(b + "/" + f, a + "/" + f, fs::copy_options::overwrite_existing);
  const Snapshot before = snapshot(a);
  require_error(run_rosetta("translate --model " + a, "der Hund sieht den Ball.\n"),
                {"src.model", "is not the tokenizer", "checksum differs"});
  require_error(run_rosetta("train --resume " + a + " --max-steps 6"),
                {"src.model", "is not the tokenizer", "checkpoint.safetensors"});
  require_untouched(before, a, {"train.log"});
}

TEST_CASE("bad input: train --resume with changed model options", "[badinput]") {
  TempDir work("bad_resume_opts");
  const std::string run = train_copy(work, "run");
  const Snapshot before = snapshot(run);
  // On the command line...
  require_error(run_rosetta("train --resume " + run + " --max-steps 6 --d-model 32"),
                {"checkpoint.safetensors", "trained with model.d_model = 16, config.toml says 32"});
  require_untouched(before, run, {"train.log"});
  // ... and in the run's config.toml.
  std::string toml = slurp(run + "/config.toml");
  const size_t at = toml.find("heads=2");
  REQUIRE(at != std::string::npos);
  toml.replace(at, 7, "heads=4");
  write_file(run + "/config.toml", toml);
  const Snapshot edited = snapshot(run);
  require_error(run_rosetta("train --resume " + run + " --max-steps 6"),
                {"checkpoint.safetensors", "trained with model.heads = 2, config.toml says 4"});
  require_untouched(edited, run, {"train.log"});
}

// ---------------------------------------------------------------- configuration

namespace {
// `train --config FILE --out DIR` with FILE holding `toml`: a clean error, DIR not created.
void require_bad_config(const std::string& toml, const std::vector<std::string>& fragments) {
  TempDir work("bad_config");
  write_file(work / "c.toml", toml);
  const RunResult r = run_rosetta("train --task copy --max-steps 1 --config " + (work / "c.toml") + " --out " +
                                  (work / "run"));
  require_error(r, fragments);
  REQUIRE_FALSE(fs::exists(work / "run"));
}
}  // namespace

TEST_CASE("bad input: a config with a zero size", "[badinput]") {
  require_bad_config("d-model=0\n", {"--d-model must be positive, got 0"});
  require_bad_config("encoder-layers=0\n", {"--encoder-layers must be positive, got 0"});
  require_bad_config("max-tokens=0\n", {"--max-tokens must be positive, got 0"});
}

TEST_CASE("bad input: a config with a negative size", "[badinput]") {
  require_bad_config("heads=-2\n", {"--heads must be positive, got -2"});
  require_bad_config("ff=-1024\n", {"--ff must be positive, got -1024"});
  require_bad_config("copy-train-size=-5\n", {"--copy-train-size must be positive, got -5"});
}

TEST_CASE("bad input: more model replicas than threads", "[badinput]") {
  require_bad_config("threads=2\nreplicas=3\n",
                     {"--replicas 3 exceeds the 2 threads of this process (one replica per thread; see --threads)"});
  require_bad_config("replicas=-1\n", {"--replicas -1 outside [0, 1024]"});
  // (100000 threads were capped to 64 and, under a memory limit, hung in OpenBLAS's allocator.)
  require_bad_config("threads=100000\n", {"--threads 100000 outside [0, 1024] (0: the default)"});
}

TEST_CASE("bad input: int8 asked of training", "[badinput]") {
  require_bad_config("precision=\"int8\"\n", {"c.toml", "precision", "int8 not in {fp32,bf16,auto}"});
  require_error(run_rosetta("bench --preset tiny --steps 1 --precision int8"), {"--precision int8 is for decoding"});
}

TEST_CASE("bad input: a config with d_model not divisible by heads", "[badinput]") {
  require_bad_config("d-model=30\nheads=4\n", {"--d-model 30 is not divisible by --heads 4"});
}

TEST_CASE("bad input: a config with unknown keys", "[badinput]") {
  require_bad_config("d-model=32\nd_modle=32\n", {"c.toml:2: unknown option 'd_modle'"});
  require_bad_config("[model]\nd-model=32\n", {"c.toml:2: unknown option 'model.d-model'"});
  require_bad_config("resume=\"somewhere\"\n", {"c.toml:1: unknown option 'resume'"});
  require_bad_config("d-model=thirty-two\n", {"c.toml:1:", "d-model", "thirty-two"});
  require_bad_config("# a comment\n\ndropout=\"abc\"\n", {"c.toml:3: dropout", "abc"});
}

// CLI11's reader took `lr = = 3` as two values and a second `lr` as a second value: both said
// "--lr: At Most 1 required but received 2", naming neither the line nor the mistake.
TEST_CASE("bad input: a config line that is not key = value, or a key given twice", "[badinput]") {
  require_bad_config("d-model=32\nlr = = 3\n", {"c.toml:2: 'lr = = 3' is not key = value with one value"});
  require_bad_config("lr=0.001\nd-model=32\nlr = 0.002 # again\n",
                     {"c.toml:3: lr is given again (first on line 1)"});
  require_bad_config("lr 0.001\n", {"c.toml:1: 'lr 0.001' is not key = value"});
  require_bad_config("[model\nd-model=32\n", {"c.toml:1: '[model' is not a [table] header"});
  require_bad_config("out=\"unterminated\n", {"c.toml:1:", "is not key = value"});
  // What --dump-config writes reads back (tests/apps/test_cli.cpp); so do comments after a
  // value, spaces around '=', CRLF line ends and the other TOML values.
  require_bad_config("lr = 0.001 # a comment\r\nlabel-smoothing=1e-1\r\nextra-tag=true\r\ndropout=2\r\n",
                     {"--dropout 2 outside [0, 1)"});
}

TEST_CASE("bad input: a config with a dropout outside 0 <= p < 1", "[badinput]") {
  require_bad_config("dropout=1\n", {"--dropout 1 outside [0, 1)"});
  require_bad_config("dropout=-0.1\n", {"--dropout -0.1 outside [0, 1)"});
  require_bad_config("dropout=1.5\n", {"--dropout 1.5 outside [0, 1)"});
}

TEST_CASE("bad input: lengths that do not fit the model", "[badinput]") {
  TempDir work("bad_lengths");
  const std::string out = existing_out(work);
  const Snapshot before = snapshot(out);
  const std::string train = " --train " + toy_tsv(work) + " ";
  require_error(run_rosetta("train" + train + "--max-len 16 --max-src-len 128 --max-tokens 64 --out " + out),
                {"--max-src-len 128 is longer than --max-len 16"});
  require_error(run_rosetta("train" + train + "--max-len 64 --max-src-len 64 --max-tgt-len 64 --max-tokens 64 --out " + out),
                {"--max-tgt-len 64 does not fit --max-len 64"});
  require_error(run_rosetta("train" + train + "--max-src-len -1 --out " + out), {"--max-src-len", "-1"});
  require_error(run_rosetta("train" + train + "--max-tokens 100 --out " + out),
                {"--max-tokens 100 is smaller than --max-len 256"});
  require_untouched(before, out);
}

// ---------------------------------------------------------------- command line

TEST_CASE("bad input: unknown flags and commands", "[badinput]") {
  TempDir work("bad_flags");
  RunResult r = run_rosetta("train --task copy --d-modle 32 --out " + (work / "run"));
  require_error(r, {"--d-modle", "rosetta train --help"});
  REQUIRE(r.exit_code == 2);
  REQUIRE_FALSE(fs::exists(work / "run"));
  require_error(run_rosetta("translate --model " + (work / "run") + " --beam-size 3"), {"--beam-size"});
  require_error(run_rosetta("translate"), {"--model is required"});
  require_error(run_rosetta("train --task copy --d-model abc"), {"--d-model", "abc"});
  require_error(run_rosetta("train --task translation"), {"--task", "translation"});
  r = run_rosetta("trian --task copy");
  require_error(r, {"unknown command 'trian'", "train"});
  REQUIRE(r.exit_code == 2);
}

// ---------------------------------------------------------------- output directories

TEST_CASE("bad input: an output directory that cannot be written", "[badinput]") {
  TempDir work("bad_out");
  write_file(work / "file.txt", "a regular file\n");
  const Snapshot before = snapshot(work.str());
  const std::string copy = std::string("train ") + kCopyFlags + " --ff 32 --max-steps 2 --out ";
  require_error(run_rosetta(copy + (work / "file.txt/run")), {"file.txt/run", "Not a directory"});
  require_error(run_rosetta(copy + (work / "file.txt")), {"file.txt", "Not a directory"});
  require_error(run_rosetta(copy + "/proc/rosetta-run"), {"/proc/rosetta-run", "cannot create directory"});
  require_untouched(before, work.str());

  const std::string run = train_copy(work, "run");
  const Snapshot run_before = snapshot(run);
  // translate, eval and plot refuse before doing the work.
  require_error(run_rosetta("translate --model " + run + " --output " + (work / "file.txt/out.txt"), "1 2\n"),
                {"--output", "file.txt", "is not a directory"});
  require_error(run_rosetta("translate --model " + run + " --output /proc/rosetta-out.txt", "1 2\n"),
                {"/proc/rosetta-out.txt"});
  require_error(run_rosetta("translate --model " + run + " --output " + run, "1 2\n"), {"--output", "is a directory"});
  require_error(run_rosetta("translate --model " + run + " --attention " + (work / "nodir/a.svg"), "1 2\n"),
                {"--attention", "does not exist"});
  require_error(run_rosetta("plot --run " + run + " --out " + (work / "file.txt/p.svg")), {"--out", "file.txt"});
  require_untouched(run_before, run);
  require_untouched(before, work.str());
}

TEST_CASE("bad input: train --out DIR where DIR already holds a run", "[badinput]") {
  TempDir work("bad_existing_run");
  const std::string run = train_copy(work, "run");
  const Snapshot before = snapshot(run);
  require_error(run_rosetta(std::string("train ") + kCopyFlags + " --ff 32 --max-steps 2 --out " + run),
                {"--out " + run + " already holds a trained model", "--resume"});
  require_error(run_rosetta("train --train " + toy_tsv(work) + " " + kToyFlags + " --out " + run),
                {"already holds a trained model"});
  require_untouched(before, run);  // train.log included
  // Nor does a resumed run move: --out elsewhere is refused, nothing made there.
  require_error(run_rosetta("train --resume " + run + " --max-steps 5 --out " + (work / "elsewhere")),
                {"--out " + (work / "elsewhere") + " with --resume " + run, "continues in its own directory"});
  REQUIRE_FALSE(fs::exists(work / "elsewhere"));
  require_untouched(before, run, {"train.log"});
}

TEST_CASE("bad input: --resume of a directory that holds no run", "[badinput]") {
  TempDir work("bad_resume_dir");
  require_error(run_rosetta("train --resume " + (work / "nope")), {"--resume", "nope", "is not a directory"});
  fs::create_directories(work / "empty");
  require_error(run_rosetta("train --resume " + (work / "empty")), {"--resume", "empty", "holds no config.toml"});
  // A run stopped before its first checkpoint starts over (tests/apps/test_kill.cpp), unless that
  // would replace a best.safetensors.
  const std::string run = train_copy(work, "run");
  fs::remove(run + "/checkpoint.safetensors");
  fs::remove(run + "/checkpoint.prev.safetensors");
  const Snapshot before = snapshot(run);
  require_error(run_rosetta("train --resume " + run), {"holds no checkpoint.safetensors", "best.safetensors"});
  require_untouched(before, run, {"train.log"});
}

// ---------------------------------------------------------------- models

TEST_CASE("bad input: translate on a directory with no model", "[badinput]") {
  TempDir work("bad_nomodel");
  fs::create_directories(work / "empty");
  require_error(run_rosetta("translate --model " + (work / "empty"), "1 2\n"), {"empty", "holds no model"});
  require_error(run_rosetta("translate --model " + (work / "nope"), "1 2\n"), {"nope", "is not a directory"});
  write_file(work / "file", "x");
  require_error(run_rosetta("eval --model " + (work / "file") + " --test " + (work / "file")),
                {"file", "is not a directory"});
}

TEST_CASE("bad input: input lines longer than the model's maximum length are truncated with a warning",
          "[badinput]") {
  TempDir work("bad_maxlen");
  const std::string run = train_copy(work, "run");  // --max-len 16
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += std::to_string(i % 6) + " ";
  const RunResult r = run_rosetta("translate --model " + run + " --beam 1", "1 2 3\n" + longer + "\n4 5\n");
  INFO(r.output);
  require_no_crash(r);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("1 input line(s) longer than the model's maximum of 16 tokens were truncated"));
  REQUIRE(r.output.find("rosetta: error") == std::string::npos);
  // A symbol the copy task does not know names its line.
  require_error(run_rosetta("translate --model " + run, "1 2\n1 9\n"), {"<stdin>: line 2", "'9'"});
}

// ---------------------------------------------------------------- outputs

TEST_CASE("bad input: an output flag naming one of a run's files, or a weights file", "[badinput]") {
  TempDir work("bad_output_over_run");
  const std::string run = train_copy(work, "run");
  const Snapshot before = snapshot(run);
  const std::string in = work / "in.txt";
  write_file(in, "1 2 3\n");
  for (const std::string& args :
       {"translate --model " + run + " --input " + in + " --output " + run + "/checkpoint.safetensors",
        "translate --model " + run + " --input " + in + " --attention " + run + "/best.safetensors",
        "translate --model " + run + " --input " + in + " --output " + run + "/config.toml",
        "plot --run " + run + " --out " + run + "/metrics.jsonl", "report " + run + " --out " + run + "/train.log",
        "average --inputs " + run + "/best.safetensors " + run + "/checkpoint.safetensors --out " + run +
            "/best.safetensors"})
    require_error(run_rosetta(args), {"is a file of the run in " + run, "not written over"});
  // Nor through a link to one of them.
  fs::create_symlink(fs::absolute(run + "/checkpoint.safetensors"), work / "link.txt");
  require_error(run_rosetta("translate --model " + run + " --input " + in + " --output " + (work / "link.txt")),
                {"is a file of the run in", "not written over"});
  require_untouched(before, run);
  // A weights file anywhere is not a text output's to replace; nor is an input average's.
  fs::copy_file(run + "/best.safetensors", work / "mine.safetensors");
  require_error(run_rosetta("translate --model " + run + " --input " + in + " --output " + (work / "mine.safetensors")),
                {"mine.safetensors is a weights or tokenizer file"});
  require_error(run_rosetta("average --inputs " + (work / "mine.safetensors") + " " + run + "/best.safetensors --out " +
                            (work / "mine.safetensors")),
                {"is one of the files averaged"});
  REQUIRE(slurp(work / "mine.safetensors") == before.at("best.safetensors"));
  // Files of its own a command may write again.
  REQUIRE(run_rosetta("translate --model " + run + " --input " + in + " --output " + run + "/out.txt").exit_code == 0);
  REQUIRE(run_rosetta("translate --model " + run + " --input " + in + " --output " + run + "/out.txt").exit_code == 0);
}

TEST_CASE("bad input: standard output that cannot take the output, standard input that cannot be read",
          "[badinput]") {
  TempDir work("bad_std_streams");
  const std::string run = train_copy(work, "run");
  require_error(run_rosetta("translate --model " + run + " > /dev/full", "1 2 3\n"),
                {"<stdout>: write failed", "No space left on device"});
  require_error(run_rosetta("translate --model " + run + " --output /dev/full", "1 2 3\n"),
                {"/dev/full: write failed"});
  REQUIRE(fs::is_character_file("/dev/full"));  // written, not replaced by a file
  require_error(run_rosetta("train --dump-config > /dev/full"), {"<stdout>: write failed"});
  require_error(run_rosetta("translate --model " + run + " < " + work.str()), {"<stdin>: read failed", "directory"});
}

TEST_CASE("bad input: NaN and out-of-range search settings", "[badinput]") {
  TempDir work("bad_search_flags");
  const std::string run = train_copy(work, "run");
  for (const char* value : {"nan", "inf", "-1"}) {
    require_error(run_rosetta("translate --model " + run + " --length-penalty " + value, "1 2\n"),
                  {"--length-penalty", std::string("Value ") + value + " not in range"});
    require_error(run_rosetta("translate --model " + run + " --max-len-a " + value, "1 2\n"),
                  {"--max-len-a", std::string("Value ") + value + " not in range"});
  }
  const std::string out = existing_out(work);
  const Snapshot before = snapshot(out);
  require_error(run_rosetta(std::string("train ") + kCopyFlags + " --max-steps 2 --out " + out + " --valid-beam 100000"),
                {"--valid-beam 100000 outside [1, 64]"});
  require_error(run_rosetta(std::string("train ") + kCopyFlags + " --max-steps 2 --out " + out +
                            " --valid-length-penalty nan"),
                {"--valid-length-penalty nan outside [0, 10]"});
  // Copies of the corpus that do not fit the memory are refused before they are made.
  require_error(run_rosetta("train --train " + toy_tsv(work) + " " + kToyFlags +
                            " --max-steps 2 --memory-limit 64M --train-repeat 100000 --out " + out),
                {"copying the training pairs needs", "--train-repeat 100000"});
  require_untouched(before, out);
}

TEST_CASE("bad input: whole numbers too large for their option, or negative for an unsigned one", "[badinput]") {
  TempDir work("bad_integers");
  const std::string out = existing_out(work);
  const Snapshot before = snapshot(out);
  // CLI11 kept what strtoll/strtoull returned: the largest int64 (no step limit), the largest uint64.
  for (const auto& [flag, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"--max-steps 99999999999999999999", "--max-steps: Value 99999999999999999999 out of range"},
           {"--seed -1", "--seed: Value -1 out of range 0 to 18446744073709551615"},
           {"--ff 2.5", "--ff: Value 2.5 is not a whole number"}})
    require_error(run_rosetta(std::string("train ") + kCopyFlags + " --out " + out + " " + flag), {fragment});
  require_untouched(before, out);
}

TEST_CASE("translate says when the best weights it was asked for are not there yet", "[badinput]") {
  TempDir work("no_best");
  const std::string run = copy_run(train_copy(work, "run"), work / "nobest");  // without best.safetensors
  const RunResult r = run_rosetta("translate --model " + run, "1 2\n");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("holds no best.safetensors (no validation yet): using its latest checkpoint"));
  REQUIRE_THAT(run_rosetta("translate --model " + run + " --checkpoint last", "1 2\n").output,
               !Catch::Contains("holds no best.safetensors"));
}

TEST_CASE("bad input: score with an empty reference names the file and line", "[badinput]") {
  TempDir work("bad_score_ref");
  write_file(work / "hyp.txt", "a b c\nd e f\n");
  write_file(work / "ref.txt", "a b c\n\n");
  require_error(run_rosetta("score --hyp " + (work / "hyp.txt") + " --ref " + (work / "ref.txt")),
                {(work / "ref.txt") + ":2: an empty reference"});
}
