// Data-parallel training: `mpiexec -n 2 rosetta train` against one process with --accum 2, on
// the copy task with a tiny model, one thread per process and no dropout.
//
// Two ranks take batches (2i, 2i+1) of the shared data order, one each; one process with
// --accum 2 takes the same two batches in one update. The gradients are then the same sums in
// another order, so the parameters agree to float rounding (not bit for bit).
//
// Except the attention key biases: q.(k + b) adds the same q.b to every score of a query's row,
// which softmax ignores, so their gradient is 0 plus rounding noise, and Adam, which divides by
// the gradient's running RMS, turns noise of either sign into steps of +-lr. They are compared
// only for staying small; they differ as much between two single-process runs that sum in
// another order (other thread counts). The environment Open MPI needs here: mpi_env.h.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/cli_support.h"
#include "mpi_env.h"
#include "rosetta/core/safetensors.h"

namespace {

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using json = nlohmann::json;
using rosetta::test::container_friendly_mpi_env;

// --ema 0: the moving average is one flat tensor in which the attention key biases (which ranks
// agree on only to a few lr steps, see the top of the file) cannot be told from the rest.
// fp32 products: the ranks' different summation orders stay at fp32 rounding (in bf16 a weight
// that differs in its last bit can round to the other bf16 neighbour, and runs drift further).
const char* kFlags =
    "--precision fp32 --ema 0 --task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 "
    "--max-tokens 96 --lr 3e-3 --warmup 4 --dropout 0 --copy-symbols 8 --copy-min-len 3 "
    "--copy-max-len 6 --copy-train-size 600 --copy-valid-size 40 --valid-bleu-sentences 40 "
    "--max-len 16 --threads 1 --log-every 1";

RunResult run(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1 < /dev/null").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// `rosetta ARGS` on `ranks` MPI processes (0: a plain process, no MPI), killed after 5 minutes.
RunResult rosetta_on(int ranks, const std::string& args) {
  container_friendly_mpi_env();
  const std::string bin = ROSETTA_BIN;
  if (ranks == 0) return run("timeout 300 " + bin + " " + args);
  return run("timeout 300 " + std::string(ROSETTA_MPIEXEC) + " -n " + std::to_string(ranks) + " " + bin + " " + args);
}

bool is_key_bias(const std::string& name) { return name.ends_with("k_proj.bias"); }

// The largest |a - b| over the tensors of two checkpoints (weights and optimizer state) that
// `select` picks; the checkpoints must hold the same names and shapes.
double max_abs_diff(const std::string& a_path, const std::string& b_path, bool (*select)(const std::string&)) {
  const rosetta::SafeTensors a = rosetta::load_safetensors(a_path), b = rosetta::load_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double worst = 0;
  for (const auto& [name, ta] : a.tensors) {
    INFO(name);
    const rosetta::Tensor* tb = b.find(name);
    REQUIRE(tb != nullptr);
    REQUIRE(ta.shape() == tb->shape());
    if (!select(name)) continue;
    const auto va = ta.to_vector<double>(), vb = tb->to_vector<double>();
    for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  }
  return worst;
}

// Checkpoints of the same training up to float rounding (see the top of the file).
void require_same_training(const std::string& a, const std::string& b) {
  const double diff = max_abs_diff(a, b, [](const std::string& n) { return !is_key_bias(n); });
  const double key_bias_diff = max_abs_diff(a, b, is_key_bias);
  WARN(b << " vs " << a << ": max |difference| " << diff << " (attention key biases: " << key_bias_diff << ")");
  REQUIRE(diff < 1e-5);
  REQUIRE(key_bias_diff < 8 * 2 * 3e-3);  // at most 8 updates of +-lr each way
}

std::vector<json> metrics(const std::string& path, const char* kind) {
  std::vector<json> out;
  std::istringstream in(rosetta::test::slurp(path));
  std::string line;
  while (std::getline(in, line))
    if (json j = json::parse(line); j["kind"] == kind) out.push_back(j);
  return out;
}

}  // namespace

TEST_CASE("2 ranks train as one process with --accum 2, and resume on any number of ranks", "[mpi]") {
  TempDir dir("mpi");
  const std::string flags = std::string(kFlags) + " --validate-every 4";

  // 8 updates of 2 batches each: one process, and two ranks.
  RunResult r = rosetta_on(0, "train " + flags + " --accum 2 --max-steps 8 --out " + (dir / "single"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = rosetta_on(2, "train " + flags + " --max-steps 8 --out " + (dir / "two"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("data-parallel over 2 processes"));
  // Both ranks hold rank 0's parameters exactly (checked by the trainer at every checkpoint).
  REQUIRE_THAT(r.output, Catch::Contains("largest difference of a rank's parameters from rank 0's: 0 (identical)"));
  // Only rank 0 logs: each line once.
  REQUIRE(r.output.find("stopped at step 8") == r.output.rfind("stopped at step 8"));

  require_same_training(dir / "single/checkpoint.safetensors", dir / "two/checkpoint.safetensors");

  // The same losses, gradient norms and token counts at every step; the same validation.
  const auto s = metrics(dir / "single/metrics.jsonl", "train"), t = metrics(dir / "two/metrics.jsonl", "train");
  REQUIRE(s.size() == 8);
  REQUIRE(t.size() == 8);
  for (size_t i = 0; i < s.size(); ++i) {
    REQUIRE_THAT(t[i]["loss"].get<double>(), Catch::WithinAbs(s[i]["loss"].get<double>(), 1e-5));
    REQUIRE_THAT(t[i]["grad_norm"].get<double>(), Catch::WithinRel(s[i]["grad_norm"].get<double>(), 1e-4));
    REQUIRE(t[i].contains("allreduce_ms"));
  }
  const auto sv = metrics(dir / "single/metrics.jsonl", "valid"), tv = metrics(dir / "two/metrics.jsonl", "valid");
  REQUIRE(sv.size() == 2);
  REQUIRE(tv.size() == 2);
  REQUIRE_THAT(tv[1]["loss"].get<double>(), Catch::WithinAbs(sv[1]["loss"].get<double>(), 1e-5));
  REQUIRE(tv[1]["exact"] == sv[1]["exact"]);

  // Stop after 4 updates on 2 ranks, resume on 1 process with --accum 2 to 8 updates; and the
  // other way round. The checkpoint's data position does not depend on the number of ranks.
  r = rosetta_on(2, "train " + flags + " --max-steps 4 --out " + (dir / "two_then_one"));
  REQUIRE(r.exit_code == 0);
  r = rosetta_on(0, "train --resume " + (dir / "two_then_one") + " --accum 2 --max-steps 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("resumed at step 4"));
  r = rosetta_on(0, "train " + flags + " --accum 2 --max-steps 4 --out " + (dir / "one_then_two"));
  REQUIRE(r.exit_code == 0);
  r = rosetta_on(2, "train --resume " + (dir / "one_then_two") + " --accum 1 --max-steps 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("resumed at step 4"));
  for (const char* run : {"two_then_one", "one_then_two"})
    require_same_training(dir / "single/checkpoint.safetensors", dir / (std::string(run) + "/checkpoint.safetensors"));
}

TEST_CASE("2 ranks with dropout: stopped and resumed, the run continues bit for bit", "[mpi]") {
  // Each rank draws its own dropout masks (a stream derived from the seed and its rank); at a
  // checkpoint the root keeps every rank's stream position, so a resumed run draws the same masks.
  TempDir dir("mpi_dropout");
  std::string flags = std::string(kFlags) + " --validate-every 4 --save-every 4";
  flags.replace(flags.find("--dropout 0 "), 12, "--dropout 0.2 ");
  RunResult r = rosetta_on(2, "train " + flags + " --max-steps 8 --out " + (dir / "straight"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = rosetta_on(2, "train " + flags + " --max-steps 4 --out " + (dir / "resumed"));
  REQUIRE(r.exit_code == 0);
  r = rosetta_on(2, "train --resume " + (dir / "resumed") + " --max-steps 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto a = metrics(dir / "straight/metrics.jsonl", "train"), b = metrics(dir / "resumed/metrics.jsonl", "train");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i]["loss"].get<double>() == b[i]["loss"].get<double>());
  REQUIRE(max_abs_diff(dir / "straight/checkpoint.safetensors", dir / "resumed/checkpoint.safetensors",
                       [](const std::string&) { return true; }) == 0);
}

TEST_CASE("SIGTERM to one rank stops every rank at the same update, with a checkpoint", "[mpi]") {
  container_friendly_mpi_env();
  TempDir dir("mpi_signal");
  const std::string log = dir / "out.log";
  const std::string cmd = std::string(ROSETTA_MPIEXEC) + " -n 2 " + ROSETTA_BIN + " train " + kFlags +
                          " --max-steps 1000000 --validate-every 0 --out " + (dir / "run") + " > " + log + " 2>&1";
  const pid_t shell = fork();
  REQUIRE(shell >= 0);
  if (shell == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Once training runs (metrics appear), signal the last rank only.
  std::vector<pid_t> ranks;
  for (int i = 0; i < 600 && (ranks.size() < 2 || !rosetta::test::fs::exists(dir / "run/metrics.jsonl")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ranks = rosetta::test::children_of(shell);  // mpiexec exec'd in place of the shell: the ranks are its children
  }
  int status = 0;
  if (ranks.size() < 2) {
    kill(shell, SIGKILL);
    waitpid(shell, &status, 0);
    FAIL("the ranks did not start: " << rosetta::test::slurp(log));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(kill(ranks.back(), SIGTERM) == 0);
  for (int i = 0; i < 600 && waitpid(shell, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!WIFEXITED(status) && !WIFSIGNALED(status)) {
    kill(shell, SIGKILL);
    waitpid(shell, &status, 0);
    FAIL("still running a minute after the signal: " << rosetta::test::slurp(log));
  }
  const std::string out = rosetta::test::slurp(log);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE_THAT(out, Catch::Contains("(interrupted)"));
  REQUIRE_THAT(out, Catch::Contains("(identical)"));
  REQUIRE(rosetta::test::fs::exists(dir / "run/checkpoint.safetensors"));

  // --max-time: the ranks' clocks differ, the decision does not.
  const RunResult r = rosetta_on(2, "train " + std::string(kFlags) + " --max-time 1 --validate-every 0 --out " +
                                        (dir / "timed"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("(max-time)"));
}

TEST_CASE("an error on one rank ends the whole job", "[mpi]") {
  TempDir dir("mpi_err");
  RunResult r = rosetta_on(0, "train " + std::string(kFlags) + " --max-steps 1 --out " + (dir / "run"));
  REQUIRE(r.exit_code == 0);
  // Rank 0 alone looks at the run directory and refuses it; rank 1 would wait for it forever.
  r = rosetta_on(2, "train " + std::string(kFlags) + " --max-steps 1 --out " + (dir / "run"));
  INFO(r.output);
  REQUIRE(r.exit_code != 0);
  REQUIRE(r.exit_code != 124);  // not ended by the timeout
  REQUIRE_THAT(r.output, Catch::Contains("already holds a trained model"));
}

TEST_CASE("2 ranks under a time budget set the same rates, from rank 0's estimate", "[mpi]") {
  // The ranks' clocks differ: if each estimated the budget's updates itself, their learning rates
  // and then their weights would part (a checkpoint would find and resynchronize them).
  TempDir dir("mpi_budget");
  std::string flags = std::string(kFlags) + " --schedule linear --decay-to 0.1 --max-time 2 --validate-every 0";
  flags.replace(flags.find("--warmup 4 "), 11, "--warmup 10% ");
  flags.replace(flags.find("--log-every 1"), 13, "--log-every 5");
  const RunResult r = rosetta_on(2, "train " + flags + " --out " + (dir / "run"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("(max-time)"));
  REQUIRE_THAT(r.output, Catch::Contains("largest difference of a rank's parameters from rank 0's: 0 (identical)"));
  const auto records = metrics(dir / "run/metrics.jsonl", "train");
  REQUIRE(records.size() >= 5);
  REQUIRE(records.back().contains("budget_steps"));
  // Past its peak the rate only falls (where it ends depends on the load of the machine's last
  // moments, which tests/apps/test_budget.cpp measures on one process).
  size_t peak = 0;
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i]["lr"].get<double>() > records[peak]["lr"].get<double>()) peak = i;
  REQUIRE(peak + 1 < records.size());
  for (size_t i = peak + 1; i < records.size(); ++i)
    REQUIRE(records[i]["lr"].get<double>() <= records[i - 1]["lr"].get<double>());
}
