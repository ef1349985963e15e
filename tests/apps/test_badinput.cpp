// Bad input gets a clear error, never a crash: every case runs the real rosetta binary on one
// kind of bad input and checks that it exits non-zero with exactly one readable line
// "rosetta: error: ..." naming the file, line or value (no crash, abort, stack trace or sanitizer
// report), and that files already in the output directory are left as they were.
// Tagged [badinput]; tiny models (a few updates of a 16-wide Transformer), so the battery
// takes seconds.
//
// This file: corpora, checkpoints, tokenizers and resumed runs; test_badinput_cli.cpp: flags,
// configurations, output paths and decoding settings. Fixtures: badinput_support.h.
#include "badinput_support.h"

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

