// Training faults lose nothing: a run killed with SIGKILL at random moments and resumed each
// time ends exactly where an uninterrupted run ends; SIGTERM and SIGINT finish the step, save
// and say how to resume; a non-finite loss stops (or skips) without touching the last good
// checkpoint; the same seed and thread count give the same losses. Tagged [faults].
#include <signal.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "cli_support.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/safetensors.h"

namespace {

using nlohmann::json;
using rosetta::test::Proc;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::checkpoint_step;
using rosetta::test::read_jsonl;
using rosetta::test::run_rosetta;
using rosetta::test::sleep_ms;
using rosetta::test::train_losses;
using rosetta::test::slurp;
using rosetta::test::wait_for_file;
namespace fs = std::filesystem;

// A copy-task run small enough for a few hundred updates a second; one thread, no dropout
// randomness to worry about, so losses are bit-for-bit reproducible.
const char* kFlags =
    "--task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
    "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 400 "
    "--copy-valid-size 10 --valid-bleu-sentences 5 --log-every 1 --dropout 0.1 --lr 3e-3 --warmup 20";

// The step of the last complete record of a metrics.jsonl (0 when there is none).
int64_t last_step(const std::string& metrics) {
  const std::string text = slurp(metrics);
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return 0;
  const size_t begin = text.rfind('\n', end - 1);
  const json j = json::parse(text.substr(begin == std::string::npos ? 0 : begin + 1, end), nullptr, false);
  return j.is_object() && j.contains("step") ? j["step"].get<int64_t>() : 0;
}

// Lets `p` train until its metrics reach step `target` (or it ends), polling every millisecond.
void run_until_step(Proc& p, const std::string& metrics, int64_t target) {
  for (int i = 0; i < 60000 && p.running(); ++i) {
    if (last_step(metrics) >= target) return;
    sleep_ms(1);
  }
}

bool all_finite(const std::string& path) {
  for (const auto& [name, t] : rosetta::load_safetensors(path).tensors) {
    if (t.dtype() != rosetta::DType::f32) continue;
    const rosetta::Tensor c = t.contiguous();
    const float* p = c.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(p[i])) return false;
  }
  return true;
}

// The run translates: the checkpoint loads and the CLI answers one line per input line.
void require_translates(const std::string& dir) {
  const RunResult t = run_rosetta("translate --beam 1 --checkpoint last --model " + dir, "1 2 3\n4 5\n");
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  REQUIRE(std::count(t.output.begin(), t.output.end(), '\n') == 2);
}

std::string straight_run(const TempDir& work, const std::string& common) {
  const std::string dir = work / "straight";
  const RunResult r = run_rosetta("train " + common + " --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

}  // namespace

TEST_CASE("training killed with SIGKILL at random moments resumes to the same result", "[faults][kill]") {
  TempDir work("kill");
  const std::string common = std::string(kFlags) + " --threads 1 --max-steps 600 --save-every 3 --validate-every 200";
  const std::string straight = straight_run(work, common);

  const unsigned seed = std::random_device{}();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  const std::string dir = work / "killed", metrics = dir + "/metrics.jsonl";
  int kills = 0;
  std::vector<int64_t> resumed_at;
  // The first process is killed once its first checkpoint exists (before, a resumed run starts
  // over: the next test case); then five
  // resumed processes. Each is killed at a random moment: a random step 1..60 updates on, plus
  // 0-3 ms, so that kills land anywhere in an update, including in checkpoint writes (every 3
  // updates); or, one time in four, in the first 0-40 ms, while it starts up.
  for (int i = 0; i < 6; ++i) {
    const int64_t from = i == 0 ? 0 : checkpoint_step(dir);
    if (i > 0) resumed_at.push_back(from);
    Proc p(i == 0 ? "train " + common + " --out " + dir : "train --resume " + dir, work / ("log" + std::to_string(i)));
    if (i == 0) REQUIRE(wait_for_file(dir + "/checkpoint.safetensors", p));
    if (i > 0 && rng() % 4 == 0) {
      sleep_ms(int(rng() % 40));
    } else {
      run_until_step(p, metrics, from + 1 + int64_t(rng() % 60));
      sleep_ms(int(rng() % 4));
    }
    if (!p.running()) break;  // finished before we could kill it
    kill(p.pid, SIGKILL);
    const int code = p.wait();
    INFO(p.output());
    REQUIRE((code == 128 + SIGKILL || code == 0));
    kills += code != 0;
  }
  INFO(kills << " kills; resumed at steps " << json(resumed_at).dump());
  const RunResult last = run_rosetta("train --resume " + dir);
  INFO(last.output);
  REQUIRE(last.exit_code == 0);
  REQUIRE(kills >= 5);  // the kills landed during training, not after it
  REQUIRE(checkpoint_step(dir) == 600);
  require_translates(dir);
  // Nothing lost, nothing repeated: the metrics are those of the uninterrupted run, bit for bit.
  const auto expected = train_losses(read_jsonl(straight + "/metrics.jsonl"));
  const auto got = train_losses(read_jsonl(dir + "/metrics.jsonl"));
  REQUIRE(expected.size() == 600);
  REQUIRE(got == expected);
  // The same weights, too.
  const auto a = rosetta::load_safetensors(straight + "/best.safetensors");
  const auto b = rosetta::load_safetensors(dir + "/best.safetensors");
  REQUIRE(rosetta::serialize_safetensors(a.tensors) == rosetta::serialize_safetensors(b.tensors));
}

// A run killed before its first checkpoint leaves config.toml (and perhaps metrics, a log and
// half-written temporary files): --resume starts it over, as if it were new.
TEST_CASE("a run stopped before its first checkpoint resumes by starting over", "[faults][kill]") {
  TempDir work("restart");
  const std::string common = std::string(kFlags) + " --threads 1 --max-steps 30 --save-every 10 --validate-every 10";
  const std::string straight = straight_run(work, common);
  const std::string dir = work / "early";
  fs::create_directories(dir);
  fs::copy_file(straight + "/config.toml", dir + "/config.toml");
  rosetta::test::write_file(dir + "/metrics.jsonl", "{\"kind\":\"train\",\"step\":1,\"loss\":99}\n");
  rosetta::test::write_file(dir + "/checkpoint.safetensors.tmp.12345.0", "half a checkpoint");
  rosetta::test::write_file(dir + "/notes.txt", "the user's");
  const RunResult r = run_rosetta("train --resume " + dir + "/");  // a trailing slash, as shells complete it
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("holds no checkpoint yet: starting the run over"));
  REQUIRE(checkpoint_step(dir) == 30);
  REQUIRE(train_losses(read_jsonl(dir + "/metrics.jsonl")) == train_losses(read_jsonl(straight + "/metrics.jsonl")));
  REQUIRE_FALSE(fs::exists(dir + "/checkpoint.safetensors.tmp.12345.0"));
  REQUIRE(slurp(dir + "/notes.txt") == "the user's");
}

// The same for a translation run: its tokenizers are trained again (the killed run may have
// written them, or not), and the run is the one a fresh start makes.
TEST_CASE("a translation run stopped before its first checkpoint resumes by starting over", "[faults][kill]") {
  TempDir work("restart_text");
  const std::string tsv = work / "toy.tsv";
  rosetta::test::write_tsv(tsv, rosetta::test::toy_corpus(30, 1));
  const std::string common = "--train " + tsv +
                             " --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-tokens 256"
                             " --vocab-size 50 --threads 1 --log-every 1 --valid-bleu-sentences 0 --max-steps 4";
  const std::string straight = straight_run(work, common);
  const std::string dir = work / "early";
  fs::create_directories(dir);
  fs::copy_file(straight + "/config.toml", dir + "/config.toml");
  rosetta::test::write_file(dir + "/src.model", "half a tokenizer");
  const RunResult r = run_rosetta("train --resume " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(checkpoint_step(dir) == 4);
  REQUIRE(slurp(dir + "/src.model") == slurp(straight + "/src.model"));
  REQUIRE(train_losses(read_jsonl(dir + "/metrics.jsonl")) == train_losses(read_jsonl(straight + "/metrics.jsonl")));
  const RunResult t = run_rosetta("translate --model " + dir, "der Hund\n");
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
}

TEST_CASE("SIGTERM and SIGINT finish the step, save, exit 0 and say how to resume", "[faults][signals]") {
  TempDir work("signals");
  const std::string common = std::string(kFlags) + " --threads 1 --max-steps 3000 --save-every 1000 --validate-every 1000";
  const std::string straight = straight_run(work, common);
  const std::string dir = work / "run";
  std::vector<std::string> args{"train " + common + " --out " + dir, "train --resume " + dir};
  int i = 0;
  for (const int sig : {SIGTERM, SIGINT}) {
    INFO("signal " << sig);
    Proc p(args[size_t(i)], work / ("log" + std::to_string(i)));
    ++i;
    // Once training runs (the schedule is logged just before the first update), interrupt it.
    for (int t = 0; t < 6000 && p.running() && p.output().find("schedule:") == std::string::npos; ++t) sleep_ms(10);
    sleep_ms(200);
    REQUIRE(p.running());
    kill(p.pid, sig);
    const int code = p.wait();
    const std::string out = p.output();
    INFO(out);
    REQUIRE(code == 0);
    REQUIRE_THAT(out, Catch::Contains("resume with: rosetta train --resume " + dir));
    // The checkpoint holds the step the run says it stopped at, a step short of the end.
    const size_t at = out.find("interrupted at step ");
    REQUIRE(at != std::string::npos);
    const int64_t step = std::stoll(out.substr(at + 20));
    REQUIRE(checkpoint_step(dir) == step);
    REQUIRE(step < 3000);
    require_translates(dir);
  }
  const RunResult r = run_rosetta("train --resume " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(checkpoint_step(dir) == 3000);
  REQUIRE(train_losses(read_jsonl(dir + "/metrics.jsonl")) == train_losses(read_jsonl(straight + "/metrics.jsonl")));
}

TEST_CASE("a non-finite loss with --on-nonfinite stop exits non-zero and keeps the last good checkpoint",
          "[faults][nonfinite]") {
  TempDir work("nonfinite_stop");
  const std::string dir = work / "run";
  RunResult r = run_rosetta(std::string("train ") + kFlags + " --threads 1 --max-steps 4 --save-every 2 --out " + dir);
  REQUIRE(r.exit_code == 0);
  const std::string good = slurp(dir + "/checkpoint.safetensors");
  // An absurd learning rate, unclipped: the first update blows the weights up, the next loss is
  // not finite.
  r = run_rosetta("train --resume " + dir + " --max-steps 40 --lr 1e38 --clip 0 --on-nonfinite stop");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("rosetta: error: non-finite loss at step") &&
                             Catch::Contains("stopped (--on-nonfinite stop)"));
  REQUIRE(slurp(dir + "/checkpoint.safetensors") == good);
  REQUIRE(all_finite(dir + "/checkpoint.safetensors"));
  require_translates(dir);
}

TEST_CASE("a non-finite loss with --on-nonfinite skip skips the update and keeps going", "[faults][nonfinite]") {
  TempDir work("nonfinite_skip");
  const std::string dir = work / "run";
  RunResult r = run_rosetta(std::string("train ") + kFlags + " --threads 1 --max-steps 4 --save-every 2 --out " + dir);
  REQUIRE(r.exit_code == 0);
  const std::string good = slurp(dir + "/checkpoint.safetensors");
  // The weights stay broken, so every later update is skipped, until the trainer gives up after
  // 100 skips.
  r = run_rosetta("train --resume " + dir + " --max-steps 40 --lr 1e38 --clip 0 --on-nonfinite skip");
  INFO(r.output);
  REQUIRE_THAT(r.output, Catch::Contains("update skipped (1 so far)") && Catch::Contains("update skipped (99 so far)"));
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("rosetta: error: 100 updates in a row skipped for non-finite values"));
  REQUIRE(slurp(dir + "/checkpoint.safetensors") == good);
  require_translates(dir);
}

TEST_CASE("two fresh runs with the same seed at --threads 2 have the same losses", "[faults][determinism]") {
  TempDir work("determinism");
  const std::string common = std::string(kFlags) + " --threads 2 --max-steps 60 --validate-every 30";
  std::vector<std::vector<std::pair<int64_t, double>>> runs;
  for (const char* name : {"a", "b"}) {
    const RunResult r = run_rosetta("train " + common + " --out " + (work / name));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    runs.push_back(train_losses(read_jsonl(work / (std::string(name) + "/metrics.jsonl"))));
  }
  REQUIRE(runs[0].size() == 60);
  REQUIRE(runs[0] == runs[1]);
}

// Model replicas (train/replicas.h) train shards of every batch with the dropout masks of the
// whole batch: two replicas follow one to float rounding (summation order) in fp32, and to
// bf16 rounding in bf16 (a weight that differs in its last fp32 bit can round to the other bf16
// neighbour); a run on two replicas resumes bit for bit in either precision.
TEST_CASE("a run on two model replicas follows the one-replica run and resumes bit for bit", "[faults][replicas]") {
  TempDir work("replicas");
  const std::string common = std::string(kFlags) + " --save-every 10 --validate-every 40";
  std::vector<std::pair<std::string, double>> precisions{{"fp32", 1e-5}};  // other masks: ~1e-2
  if (rosetta::bf16_supported()) precisions.emplace_back("bf16", 1e-3);
  for (const auto& [precision, tolerance] : precisions) {
    const std::string flags = common + " --precision " + precision;
    const std::string one_dir = work / ("one-" + precision), two_dir = work / ("two-" + precision);
    const RunResult one = run_rosetta("train " + flags + " --max-steps 40 --threads 1 --replicas 1 --out " + one_dir);
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    const RunResult two = run_rosetta("train " + flags + " --max-steps 40 --threads 2 --replicas 2 --out " + two_dir);
    INFO(two.output);
    REQUIRE(two.exit_code == 0);
    REQUIRE_THAT(two.output, Catch::Contains("2 model replicas"));
    REQUIRE_THAT(two.output, Catch::Contains("matrix products in " + precision));
    const auto a = train_losses(read_jsonl(one_dir + "/metrics.jsonl")), b = train_losses(read_jsonl(two_dir + "/metrics.jsonl"));
    REQUIRE(a.size() == 40);
    REQUIRE(b.size() == 40);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(precision << " step " << a[i].first);
      REQUIRE(b[i].first == a[i].first);
      REQUIRE_THAT(b[i].second, Catch::Matchers::WithinRel(a[i].second, tolerance));
    }

    const std::string dir = work / ("stopped-" + precision);
    const RunResult first = run_rosetta("train " + flags + " --threads 2 --replicas 2 --max-steps 20 --out " + dir);
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    const RunResult rest = run_rosetta("train --resume " + dir + " --max-steps 40");
    INFO(rest.output);
    REQUIRE(rest.exit_code == 0);
    REQUIRE(train_losses(read_jsonl(dir + "/metrics.jsonl")) == b);
  }
}
