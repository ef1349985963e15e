// Bad input gets a clear error, never a crash (as test_badinput.cpp): flags and configurations,
// output paths, standard input and output, and decoding settings, each run through the real
// rosetta binary, which must exit non-zero with exactly one readable line "rosetta: error: ..."
// naming the file, line or value, and leave files already in the output directory as they were.
// Fixtures: badinput_support.h.
#include "badinput_support.h"

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
