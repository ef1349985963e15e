// Faults that long CPU runs meet, each met with one clear line and nothing lost: two trainers on
// one run directory (the second refuses; train/run_lock.h), a lock left by a trainer killed with
// SIGKILL, a model or batch larger than the memory (refused before it is allocated;
// train/resources.h), an allocation that fails anyway (std::bad_alloc), a disk that fills during a
// checkpoint, a metrics.jsonl whose last line was cut. Tagged [faults] ([badinput] for bad
// options); the estimates behind the memory checks are tested against the allocator's measured
// peaks ([resources]).
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <new>
#include <thread>

#include "cli_support.h"
#include "errors.h"
#include "rosetta/train/resources.h"
#include "rosetta/translator/memory_plan.h"
#include "rosetta/autograd/functions.h"
#include "rosetta/nn/nn.h"
#include "rosetta/optim/optim.h"
#include "train_config.h"

namespace {

using namespace rosetta;
using rosetta::test::Proc;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::checkpoint_step;
using rosetta::test::read_jsonl;
using rosetta::test::require_error;
using rosetta::test::run_rosetta;
using rosetta::test::run_shell;
using rosetta::test::sleep_ms;
using rosetta::test::slurp;
using rosetta::test::train_losses;
using rosetta::test::wait_for_file;
using rosetta::test::write_file;
namespace fs = std::filesystem;

// A copy-task run of a few hundred updates a second on one thread.
const char* kFlags =
    "--task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 --max-len 16 "
    "--max-tokens 64 --copy-symbols 6 --copy-min-len 2 --copy-max-len 5 --copy-train-size 400 "
    "--copy-valid-size 10 --valid-bleu-sentences 5 --log-every 1 --threads 1";

std::string train_tiny(const TempDir& work, const std::string& name, const std::string& more = "") {
  const std::string dir = work / name;
  const RunResult r = run_rosetta(std::string("train ") + kFlags + " --max-steps 4 --save-every 2 --out " + dir + more);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// Waits (at most ~60 s) until `p` logs `text`.
bool wait_for_output(Proc& p, const std::string& text) {
  for (int i = 0; i < 6000 && p.running(); ++i) {
    if (p.output().find(text) != std::string::npos) return true;
    sleep_ms(10);
  }
  return p.output().find(text) != std::string::npos;
}

// The steps of the train records of a metrics.jsonl (every line must parse).
std::vector<int64_t> train_steps(const std::string& metrics) {
  std::vector<int64_t> steps;
  for (const auto& [step, loss] : train_losses(read_jsonl(metrics))) steps.push_back(step);
  return steps;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

void require_translates(const std::string& dir) {
  const RunResult t = run_rosetta("translate --beam 1 --checkpoint last --model " + dir, "1 2 3\n4 5\n");
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  REQUIRE(std::count(t.output.begin(), t.output.end(), '\n') == 2);
}

}  // namespace

// ---------------------------------------------------------------- one trainer per run directory

TEST_CASE("a second trainer on a live run directory refuses at once, the first keeps going", "[faults][lock]") {
  TempDir work("lock");
  const std::string dir = work / "run";
  Proc first(std::string("train ") + kFlags + " --max-steps 100000 --save-every 20 --validate-every 100000 --out " + dir,
             work / "first.log");
  REQUIRE(wait_for_output(first, "schedule:"));  // training
  REQUIRE(wait_for_file(dir + "/checkpoint.safetensors", first));
  const std::string owner = "PID " + std::to_string(first.pid);
  require_error(run_rosetta("train --resume " + dir), {dir + " is in use by another rosetta train", owner});
  require_error(run_rosetta(std::string("train ") + kFlags + " --out " + dir), {dir + " is in use", owner});
  // The readers go on: they read files written atomically.
  require_translates(dir);
  const RunResult report = run_rosetta("report " + dir + " --out " + (work / "report.html"));
  INFO(report.output);
  REQUIRE(report.exit_code == 0);

  REQUIRE(first.running());
  kill(first.pid, SIGTERM);
  REQUIRE(first.wait() == 0);
  const std::string out = first.output();
  INFO(out);
  const size_t at = out.find("interrupted at step ");
  REQUIRE(at != std::string::npos);
  const int64_t step = std::stoll(out.substr(at + 20));
  // The run is the first trainer's alone: its checkpoint, and every update logged once.
  REQUIRE(checkpoint_step(dir) == step);
  REQUIRE(train_steps(dir + "/metrics.jsonl") == one_to(step));
  REQUIRE(slurp(dir + "/train.log").find("resuming run") == std::string::npos);
  // Once it has ended, the directory is free.
  const RunResult next = run_rosetta("train --resume " + dir + " --max-steps " + std::to_string(step + 2));
  INFO(next.output);
  REQUIRE(next.exit_code == 0);
  REQUIRE(checkpoint_step(dir) == step + 2);
}

TEST_CASE("a lock left by a trainer killed with SIGKILL does not block the next --resume", "[faults][lock]") {
  TempDir work("lock_kill");
  const std::string dir = work / "run";
  Proc first(std::string("train ") + kFlags + " --max-steps 100000 --save-every 5 --validate-every 100000 --out " + dir,
             work / "first.log");
  REQUIRE(wait_for_file(dir + "/checkpoint.safetensors", first));
  kill(first.pid, SIGKILL);
  REQUIRE(first.wait() == 128 + SIGKILL);
  // The lock file stays, naming the dead owner; its lock went with the process.
  REQUIRE(slurp(dir + "/train.lock").rfind(std::to_string(first.pid) + " ", 0) == 0);
  const int64_t from = checkpoint_step(dir);
  const RunResult r = run_rosetta("train --resume " + dir + " --max-steps " + std::to_string(from + 3));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(checkpoint_step(dir) == from + 3);
}

// ---------------------------------------------------------------- memory

namespace {

// Runs CMD under a 2 GB address-space limit; under AddressSanitizer, which reserves terabytes of
// address space for its shadow memory before main and aborts under such a limit, without it.
std::string under_2gb_address_space(const std::string& cmd) {
#if defined(__SANITIZE_ADDRESS__)
  return cmd;
#else
  return "prlimit --as=2000000000 " + cmd;
#endif
}

}  // namespace

TEST_CASE("bad input: a model larger than the memory is refused before it is allocated", "[badinput][faults]") {
  TempDir work("oversized");
  const std::string dir = work / "run";
  // Under a 2 GB address-space limit, an attempt to build it would fail with std::bad_alloc:
  // the refusal comes first, from the configuration alone.
  require_error(run_shell(under_2gb_address_space(std::string(ROSETTA_BIN) +
                                                  " train --task copy --d-model 65536 --ff 1048576 --out " + dir)),
                {"this run needs about", "TiB (weights", "optimizer state", "largest batch's activations",
                 "more than the", "available", "--d-model 65536 --ff 1048576", "--memory-limit"});
  REQUIRE_FALSE(fs::exists(dir));
  // --memory-limit replaces the detected figure, also as a config key.
  require_error(run_rosetta(std::string("train ") + kFlags + " --max-steps 2 --memory-limit 100K --out " + dir),
                {"this run needs about", "more than the 100.0 KiB of --memory-limit 100K", "--d-model 16"});
  write_file(work / "c.toml", "memory-limit = \"100K\"\n");
  require_error(run_rosetta(std::string("train ") + kFlags + " --max-steps 2 --config " + (work / "c.toml") +
                            " --out " + dir),
                {"--memory-limit 100K"});
  require_error(run_rosetta(std::string("train ") + kFlags + " --memory-limit 12X --out " + dir),
                {"--memory-limit '12X' is not a memory size"});
  REQUIRE_FALSE(fs::exists(dir));
  const RunResult ok = run_rosetta(std::string("train ") + kFlags + " --max-steps 2 --memory-limit 64M --out " + dir);
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
}

TEST_CASE("bad input: translate and eval refuse a batch or a model file larger than the memory", "[badinput][faults]") {
  TempDir work("oversized_batch");
  const std::string run = train_tiny(work, "run");
  std::string lines, tsv;
  for (int i = 0; i < 600; ++i) {
    lines += "1 2 3 4 5 0 1 2 3 4 5 0 1\n";
    tsv += "1 2 3 4 5 0 1 2 3 4 5 0 1\t1 2 3 4 5 0 1 2 3 4 5 0 1\n";
  }
  write_file(work / "test.tsv", tsv);
  // 256 sentences of 13 tokens, 4 beams each: some MiB of keys and values.
  require_error(run_rosetta("translate --model " + run + " --batch-tokens 16777216 --memory-limit 1M", lines),
                {"translating the largest batch", "needs about", "more than the 1.0 MiB of --memory-limit 1M",
                 "--batch-tokens 16777216 (256 sentences of up to 13 tokens", "--beam 4"});
  require_error(run_rosetta("eval --model " + run + " --test " + (work / "test.tsv") +
                            " --batch-tokens 16777216 --memory-limit 1M"),
                {"translating the largest batch", "needs about", "--batch-tokens 16777216"});
  // Small batches fit in the same memory.
  const RunResult ok = run_rosetta("translate --model " + run + " --beam 1 --batch-tokens 64 --memory-limit 1M", lines);
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  REQUIRE(std::count(ok.output.begin(), ok.output.end(), '\n') == 600);
  // The model file is checked before it is read.
  require_error(run_rosetta("translate --model " + run + " --memory-limit 8K", "1 2\n"),
                {"loading " + run + "/best.safetensors needs about", "on disk", "--memory-limit 8K"});
}

// Run by the next test case in a child process (hidden): an exception escaping an OpenMP region
// or a thread, with the handler main installs.
TEST_CASE("child: an allocation fails off the main thread", "[.][escape_child]") {
  const char* where = std::getenv("ROSETTA_ESCAPE");
  if (!where) return;
  cli::report_escaped_exceptions();
  if (std::string(where) == "omp") {
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 1) throw std::bad_alloc();
    }
  } else {
    std::thread([] { throw std::bad_alloc(); }).join();
  }
}

TEST_CASE("std::bad_alloc is one clear line and exit status 1, on any thread", "[faults][oom]") {
  TempDir work("bad_alloc");
  // On the main thread: a 4 GiB weight matrix under a 2 GB address-space limit (--memory-limit
  // lifts the check that would refuse it first).
#if defined(__SANITIZE_ADDRESS__)
  WARN("under AddressSanitizer the main-thread case is skipped: it needs an address-space limit, which ASan cannot run under");
#else
  require_error(run_shell("prlimit --as=2000000000 " + std::string(ROSETTA_BIN) +
                          " train --task copy --d-model 1024 --ff 1048576 --max-len 16 --max-tokens 64 --threads 1"
                          " --memory-limit 1000T --out " + (work / "run")),
                {"out of memory: an allocation failed (std::bad_alloc)", "--d-model"});
#endif
  // In an OpenMP region and in a std::thread, where it would reach std::terminate.
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  for (const char* where : {"omp", "thread"}) {
    INFO(where);
    require_error(run_shell(std::string("ROSETTA_ESCAPE=") + where + " " + self + " '[escape_child]'"),
                  {"out of memory: an allocation failed (std::bad_alloc)"});
  }
}

// ---------------------------------------------------------------- disk

namespace {

// After a checkpoint failed to be written: the error said what was kept, the previous
// checkpoint is there byte for byte, loads and resumes, and no temporary file is left.
void require_previous_checkpoint_kept(const RunResult& r, const std::string& dir, const std::string& before,
                                      const std::string& reason) {
  require_error(r, {dir + "/checkpoint.safetensors", reason, "the last checkpoint", "(step 4) is intact",
                    "rosetta train --resume " + dir});
  REQUIRE(slurp(dir + "/checkpoint.safetensors") == before);
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE(e.path().string().find(".tmp.") == std::string::npos);
  require_translates(dir);
  const RunResult next = run_rosetta("train --resume " + dir + " --max-steps 8");
  INFO(next.output);
  REQUIRE(next.exit_code == 0);
  REQUIRE(checkpoint_step(dir) == 8);
  REQUIRE(train_steps(dir + "/metrics.jsonl") == one_to(8));
}

}  // namespace

TEST_CASE("a write failure during a checkpoint leaves the last one loadable and says so", "[faults][disk]") {
  TempDir work("fsize");
  const std::string dir = train_tiny(work, "run");
  const std::string before = slurp(dir + "/checkpoint.safetensors");
  // A file size limit below the checkpoint's size (RLIMIT_FSIZE; SIGXFSZ ignored, so that the
  // write fails with EFBIG instead): the logs and metrics still fit.
  const std::string limit = std::to_string(before.size() / 2);
  const RunResult r = run_shell("trap '' XFSZ; prlimit --fsize=" + limit + " " + ROSETTA_BIN + " train --resume " +
                                dir + " --max-steps 8");
  require_previous_checkpoint_kept(r, dir, before, "File too large");
}

TEST_CASE("a full disk during a checkpoint leaves the last one loadable and says so", "[faults][disk]") {
  TempDir work("full_disk");
  const std::string mnt = work / "mnt";
  fs::create_directories(mnt);
  // A small tmpfs needs a mount namespace of our own (unshare: user namespaces, or root).
  if (run_shell("unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs " + mnt + "'").exit_code != 0) {
    WARN("cannot mount a tmpfs here (unshare -rm); the RLIMIT_FSIZE case above stands for it");
    return;
  }
  const std::string dir = train_tiny(work, "run");
  const std::string before = slurp(dir + "/checkpoint.safetensors");
  // Room for the run's files and half a checkpoint more. The tmpfs lives as long as the
  // namespace: the run is copied in, resumed there, and copied back out.
  size_t used = 0;
  for (const auto& e : fs::directory_iterator(dir)) used += (fs::file_size(e.path()) + 4095) / 4096 * 4096;
  const std::string size = std::to_string((used + before.size() / 2) / 1024 + 8) + "k";
  const std::string inner = "mount -t tmpfs -o size=" + size + " tmpfs " + mnt + " && cp -a " + dir + " " + mnt +
                            "/run && { " + ROSETTA_BIN + " train --resume " + mnt + "/run --max-steps 8; s=$?; cp -a " +
                            mnt + "/run/. " + dir + "/; exit $s; }";
  const RunResult r = run_shell("unshare -rm sh -c '" + inner + "'");
  // The messages name the tmpfs copy of the run.
  RunResult named = r;
  for (size_t at; (at = named.output.find(mnt + "/run")) != std::string::npos;)
    named.output.replace(at, mnt.size() + 4, dir);
  require_previous_checkpoint_kept(named, dir, before, "No space left on device");
}

// The newest two training checkpoints are kept (checkpoint.safetensors and
// checkpoint.prev.safetensors); --resume takes the newest that loads, says which it skipped and
// why in one warning, and sets the bad one aside. The run then ends where a run never stopped ends.
TEST_CASE("a corrupted newest checkpoint: --resume continues from the one before it", "[faults]") {
  TempDir work("fallback");
  const std::string straight = work / "straight", dir = work / "run";
  const std::string flags = std::string("train ") + kFlags + " --save-every 2 --out ";
  REQUIRE(run_rosetta(flags + straight + " --max-steps 8").exit_code == 0);
  REQUIRE(run_rosetta(flags + dir + " --max-steps 6").exit_code == 0);
  const std::string newest = dir + "/checkpoint.safetensors", previous = dir + "/checkpoint.prev.safetensors";
  REQUIRE(checkpoint_step(dir) == 6);
  REQUIRE(load_safetensors(previous).metadata.at("train.step") == "4");
  std::string bytes = slurp(newest);
  bytes[bytes.size() - 9] = char(bytes[bytes.size() - 9] ^ 0x20);  // a flipped bit in the weights
  write_file(newest, bytes);

  const RunResult r = run_rosetta("train --resume " + dir + " --max-steps 8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> warnings;
  for (const std::string& line : rosetta::test::lines_of(r.output))
    if (line.find("resuming from the checkpoint before it") != std::string::npos) warnings.push_back(line);
  REQUIRE(warnings.size() == 1);
  for (const std::string& part : {newest + ": corrupted", previous, newest + ".skipped"})
    REQUIRE(r.output.find(part) != std::string::npos);
  REQUIRE(r.output.find("resumed at step 4") != std::string::npos);
  REQUIRE(slurp(newest + ".skipped") == bytes);  // kept for a person to look at
  REQUIRE(load_safetensors(previous).metadata.at("train.step") == "6");  // the bad one was not kept as previous
  // Weights, optimizer state and progress as the run never stopped; its metrics once each.
  REQUIRE(rosetta::test::tensors_checksum_of(newest) ==
          rosetta::test::tensors_checksum_of(straight + "/checkpoint.safetensors"));
  REQUIRE(train_steps(dir + "/metrics.jsonl") == one_to(8));

  // Both bad: one error naming both, nothing changed.
  write_file(previous, "not a checkpoint");
  write_file(newest, bytes);
  const RunResult both = run_rosetta("train --resume " + dir + " --max-steps 10");
  require_error(both, {newest + ": corrupted", "and the checkpoint before it: " + previous});
  REQUIRE(slurp(newest) == bytes);
}

TEST_CASE("a metrics.jsonl whose last line was cut is repaired on --resume", "[faults]") {
  TempDir work("cut_metrics");
  const std::string dir = train_tiny(work, "run");
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"kind\":\"train\",\"step\":5,\"lo";
  const RunResult r = run_rosetta("train --resume " + dir + " --max-steps 6");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(train_steps(dir + "/metrics.jsonl") == one_to(6));
}

// ---------------------------------------------------------------- the estimates

TEST_CASE("memory sizes parse and print", "[resources][badinput]") {
  REQUIRE(train::parse_size("2G", "--memory-limit") == 2.0 * (1 << 30));
  REQUIRE(train::parse_size("512m", "--memory-limit") == 512.0 * (1 << 20));
  REQUIRE(train::parse_size("1.5GiB", "--memory-limit") == 1.5 * (1 << 30));
  REQUIRE(train::parse_size("64KB", "--memory-limit") == 64.0 * 1024);
  REQUIRE(train::parse_size("1000", "--memory-limit") == 1000.0);
  for (const char* bad : {"", "G", "-1G", "0", "2X", "2 G", "nan", "inf", "1GG"})
    REQUIRE_THROWS_WITH(train::parse_size(bad, "--memory-limit"), Catch::Contains("is not a memory size"));
  REQUIRE(train::format_size(1536) == "1.5 KiB");
  REQUIRE(train::format_size(3.0 * (uint64_t(1) << 40)) == "3.0 TiB");
}

TEST_CASE("the available memory is the smallest of MemAvailable and the cgroups' limits less usage", "[resources]") {
  TempDir root("fake_proc");
  auto put = [&](const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root / path).parent_path());
    write_file(root / path, text);
  };
  put("proc/meminfo", "MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n");
  auto available = train::detect_available_memory(root.str());
  REQUIRE(available);
  REQUIRE(available->bytes == 4000000.0 * 1024);
  REQUIRE_THAT(available->source, Catch::Contains("MemAvailable"));

  // cgroup v2: the job's limit is 1 GiB, with 600 MiB in use of which 100 MiB inactive file
  // cache; its parent has none ("max").
  put("proc/self/cgroup", "0::/jobs/job1\n");
  put("proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
  put("sys/fs/cgroup/jobs/memory.max", "max\n");
  put("sys/fs/cgroup/jobs/memory.current", "900000000\n");
  put("sys/fs/cgroup/jobs/job1/memory.max", std::to_string(1 << 30) + "\n");
  put("sys/fs/cgroup/jobs/job1/memory.current", std::to_string(600 << 20) + "\n");
  put("sys/fs/cgroup/jobs/job1/memory.stat", "anon 1\ninactive_file " + std::to_string(100 << 20) + "\n");
  available = train::detect_available_memory(root.str());
  REQUIRE(available);
  REQUIRE(available->bytes == double((1 << 30) - (500 << 20)));
  REQUIRE_THAT(available->source, Catch::Contains("cgroup /jobs/job1") && Catch::Contains("1.0 GiB"));

  // cgroup v1, mounted at the container's own cgroup: its ancestor's limit is the tighter one.
  put("proc/self/cgroup", "12:cpu:/\n4:memory,hugetlb:/docker/c1/task\n");
  put("proc/self/mountinfo", "40 31 0:32 /docker/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,hugetlb\n");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(512 << 20) + "\n");
  put("sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(200 << 20) + "\n");
  put("sys/fs/cgroup/memory/task/memory.limit_in_bytes", "9223372036854771712\n");
  put("sys/fs/cgroup/memory/task/memory.usage_in_bytes", std::to_string(100 << 20) + "\n");
  available = train::detect_available_memory(root.str());
  REQUIRE(available);
  REQUIRE(available->bytes == double(312 << 20));
}

TEST_CASE("the parameter count from the options is the model's", "[resources]") {
  for (const bool share : {false, true})
    for (const bool tie : {false, true}) {
      const auto o = nn::TransformerOptions().src_vocab(37).tgt_vocab(37).d_model(16).heads(2).ff(24)
                         .encoder_layers(2).decoder_layers(3).share_embeddings(share).tie_output(tie).max_len(20);
      Generator g(1);
      INFO("share " << share << " tie " << tie);
      REQUIRE(translator::parameter_count(o) == nn::Transformer(o, g).parameter_count());
    }
}

// The activation estimate against the allocator's peak over a forward and backward pass of a
// batch of sequences as long as the model takes (what the trainer measures and logs).
TEST_CASE("the activation estimate bounds the measured peak of a batch", "[resources]") {
  set_num_threads(1);
  struct Shape {
    int64_t d, ff, heads, layers, vocab, len, tokens;
    const char* activation;
  };
  for (const Shape& s : {Shape{32, 64, 2, 1, 50, 16, 512, "relu"}, Shape{64, 256, 4, 2, 300, 32, 1024, "gelu"},
                         Shape{96, 128, 4, 1, 1000, 64, 512, "relu"}}) {
    const auto o = nn::TransformerOptions().src_vocab(s.vocab).tgt_vocab(s.vocab).d_model(s.d).heads(s.heads).ff(s.ff)
                       .encoder_layers(s.layers).decoder_layers(s.layers).share_embeddings(true).tie_output(true)
                       .activation(nn::parse_activation(s.activation)).max_len(s.len).dropout(0.1);
    Generator g(3);
    nn::Transformer model(o, g);
    model.train();
    optim::Adam opt(model.parameters(), optim::AdamOptions());  // gradients in its buffer, as in training
    const int64_t rows = s.tokens / s.len;
    const Tensor src = g.randint({rows, s.len}, 1, s.vocab), tgt = g.randint({rows, s.len + 1}, 1, s.vocab);
    const Tensor tgt_in = tgt.narrow(1, 0, s.len).contiguous(), tgt_out = tgt.narrow(1, 1, s.len).contiguous();
    // From an empty cache: blocks cached by earlier tests would serve smaller requests.
    release_cached_memory();
    size_t measured = 0;
    for (int pass = 0; pass < 2; ++pass) {  // the second from the blocks the first left cached
      reset_allocator_peak();
      const size_t before = allocator_stats().in_use_bytes;
      {
        // As the trainer writes it: the logits die with the statement, and the loss's backward
        // turns them into their gradient in place.
        const Var loss = cross_entropy(model.forward(src, tgt_in), tgt_out, 0.1, 0);
        loss.backward();
      }
      measured = allocator_stats().peak_bytes - before;
      opt.zero_grad();
    }
    const double estimate = translator::training_activation_bytes(o, s.tokens);
    INFO("d_model " << s.d << ": measured " << measured << ", estimated " << estimate);
    REQUIRE(estimate >= double(measured));
    REQUIRE(estimate <= 1.6 * double(measured));
  }
}

// The decoding estimate against the allocator's peak over a beam search of a batch to its
// length limit.
TEST_CASE("the decoding estimate bounds the measured peak of a batch", "[resources]") {
  set_num_threads(1);
  const auto o = nn::TransformerOptions().src_vocab(50).tgt_vocab(50).d_model(32).heads(2).ff(64).encoder_layers(1)
                     .decoder_layers(2).share_embeddings(true).tie_output(true).max_len(64);
  Generator g(4);
  nn::Transformer model(o, g);
  model.eval();
  const int64_t rows = 24, S = 12;
  const Tensor src = g.randint({rows, S}, 4, 50);
  const auto search = nn::SearchOptions().beam(4).stop_at_eos(false);
  const train::MemoryPlan plan = translator::decoding_plan(o, rows, S, search, rows * S);
  release_cached_memory();
  reset_allocator_peak();
  const size_t before = allocator_stats().in_use_bytes;
  nn::search(model, src, search);
  const double measured = double(allocator_stats().peak_bytes - before);
  // The weights were allocated before, and packed weights live outside the allocator.
  double estimate = plan.total() - plan.parts[0].second;
  for (const auto& [part, bytes] : plan.parts)
    if (part == "packed weights") estimate -= bytes;
  INFO("measured " << measured << ", estimated " << estimate);
  REQUIRE(estimate >= measured);
  REQUIRE(estimate <= 2 * measured);
}

TEST_CASE("the default translator's plan fits in 1 GiB", "[resources]") {
  const translator::TrainConfig c;  // the defaults are the default translator
  const train::MemoryPlan plan = translator::training_plan(c, 2, 1);
  INFO(plan.total());
  REQUIRE(plan.total() < double(1 << 30));
  REQUIRE(plan.total() > double(256 << 20));  // ~555 MiB: 5M parameters and batches of 2,500 tokens
}
