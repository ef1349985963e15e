// rosetta translate as a stream: a line written to its standard input comes back translated
// before the next is written (--stream, the default on a terminal), file input gives the same translations in the same
// order as the library's whole-input translate_lines, progress shows only on a terminal, and a
// weights, tokenizer or checkpoint file that is a FIFO is refused at once instead of waited on.
// Every wait here has a deadline: a translator that waits for more input fails, never hangs.
#include <poll.h>
#include <pty.h>
#include <sys/stat.h>

#include <optional>

#include "cli_support.h"
#include "rosetta/core/cpu.h"
#include "rosetta/translator/translator.h"

namespace {

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::require_error;
using rosetta::test::run_rosetta;
using rosetta::test::run_shell;
using rosetta::test::slurp;
using rosetta::test::write_file;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A copy-task model that copies 3-8 symbols (0-7) after 150 updates (about a second).
std::string train_copy(const TempDir& work) { return rosetta::test::train_copy_run(work, 150); }

// n lines of 1-8 symbols, deterministic.
std::vector<std::string> copy_lines(int n) {
  std::vector<std::string> out;
  std::mt19937 rng(5);
  for (int i = 0; i < n; ++i) {
    std::string line;
    for (int k = 0, len = 1 + int(rng() % 8); k < len; ++k) line.append(k ? " " : "").append(std::to_string(rng() % 8));
    out.push_back(line);
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// `rosetta ARGS` with its standard input and output on pipes held here (or its standard input
// a terminal, a pty, with `terminal`); stderr to a file.
class Piped {
 public:
  Piped(const std::vector<std::string>& args, const std::string& stderr_path, bool terminal = false)
      : terminal_(terminal) {
    int in[2], out[2];
    REQUIRE((terminal ? openpty(&in[1], &in[0], nullptr, nullptr, nullptr) : ::pipe(in)) == 0);
    REQUIRE(::pipe(out) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err, 2);
      for (int fd : {in[0], in[1], out[0], out[1], err}) ::close(fd);
      std::vector<std::string> argv_s{ROSETTA_BIN};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  Piped(const Piped&) = delete;
  ~Piped() {
    if (to_ >= 0) ::close(to_);
    ::close(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void write_line(const std::string& line) {
    const std::string s = line + "\n";
    REQUIRE(::write(to_, s.data(), s.size()) == ssize_t(s.size()));
  }
  // The end of its input: the pipe closed, or on a terminal ^D at the start of a line.
  void close_input() {
    if (terminal_ && to_ >= 0 && !eot_sent_) {
      REQUIRE(::write(to_, "\x04", 1) == 1);
      eot_sent_ = true;
      return;
    }
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // The next line of its output, or nothing if none came within `seconds` (or it ended).
  std::optional<std::string> read_line(double seconds) {
    const auto deadline = after(seconds);
    for (;;) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (!fill(deadline)) return std::nullopt;
    }
  }
  // True when its output ended (with nothing more in it) within `seconds`.
  bool ended(double seconds) {
    const auto deadline = after(seconds);
    while (fill(deadline)) {
    }
    return eof_ && buffer_.empty();
  }
  // Its exit code, or -1 if it did not exit within `seconds`.
  int exit_code(double seconds) {
    const auto deadline = after(seconds);
    for (int status = 0; Clock::now() < deadline; rosetta::test::sleep_ms(20)) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

 private:
  // Reads what arrives before the deadline; false at the deadline or the end of its output.
  bool fill(Clock::time_point deadline) {
    if (eof_) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{from_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, int(left)) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::read(from_, buf, sizeof buf);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(buf, size_t(n));
    return true;
  }

  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
  bool eof_ = false, terminal_ = false, eot_sent_ = false;
};

// Writing to a translator that died would otherwise kill the test with SIGPIPE.
struct IgnoreSigpipe {
  void (*saved)(int) = signal(SIGPIPE, SIG_IGN);
  ~IgnoreSigpipe() { signal(SIGPIPE, saved); }
};

// The library's translations of `lines` in one call (the non-streaming path), greedy, in fp32
// (the commands here run with --precision fp32: auto may choose bf16).
std::vector<std::string> library_translations(const std::string& run, const std::vector<std::string>& lines) {
  const rosetta::MatmulPrecisionScope fp32(rosetta::Precision::fp32);
  const auto t = rosetta::translator::Translator::load(run);
  std::vector<std::string> out;
  for (const auto& h : t.translate(lines, rosetta::nn::SearchOptions().beam(1), 2048))
    out.push_back(t.codec.decode_target(h[0].tokens));
  return out;
}

// `command` (a shell command line) with its standard error on a new terminal (a pty) and its
// standard output to `stdout_path`: what it wrote on the terminal, read until it exits (at most
// 60 s; then the test fails).
std::string stderr_on_terminal(const std::string& command, const std::string& stdout_path) {
  int master = -1, slave = -1;
  REQUIRE(openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(master);
    const int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(slave, 2);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(slave);
  std::string seen;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (char buf[4096]; Clock::now() < deadline;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the terminal's last writer is gone
    seen.append(buf, size_t(n));
  }
  ::close(master);
  int status = 0;
  if (Clock::now() >= deadline) kill(pid, SIGKILL);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO(seen);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return seen;
}

}  // namespace

TEST_CASE("translate --stream writes each line's translation before the next line is written", "[stream]") {
  const IgnoreSigpipe no_sigpipe;
  TempDir work("stream");
  const std::string run = train_copy(work);
  const std::vector<std::string> lines{"3 1 4 1 5", "0 7 2 6", "", "2 2 3"};
  const std::vector<std::string> expected = library_translations(run, lines);
  REQUIRE(expected[0] == "3 1 4 1 5");  // the model copies: the lines tell apart whose translation came back
  Piped p({"translate", "--stream", "--beam", "1", "--precision", "fp32", "--model", run}, work / "stderr.txt");
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i + 1 << ": " << lines[i] << "; stderr: " << slurp(work / "stderr.txt"));
    p.write_line(lines[i]);
    // The first answer waits for the model to load too. A translator that waits for more input
    // before it writes (the whole input, or a full chunk) gives nothing here.
    const std::optional<std::string> got = p.read_line(i == 0 ? 60 : 20);
    REQUIRE(got.has_value());
    CHECK(*got == expected[i]);
  }
  // The end of its input ends it cleanly.
  p.close_input();
  CHECK(p.ended(20));
  CHECK(p.exit_code(20) == 0);
  CHECK(slurp(work / "stderr.txt").empty());
}

TEST_CASE("translate streams by default when its standard input is a terminal", "[stream]") {
  const IgnoreSigpipe no_sigpipe;
  TempDir work("stream_tty");
  const std::string run = train_copy(work);
  const std::vector<std::string> lines{"3 1 4 1 5", "0 7 2 6"};
  const std::vector<std::string> expected = library_translations(run, lines);
  Piped p({"translate", "--beam", "1", "--precision", "fp32", "--model", run}, work / "stderr.txt", true);
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i + 1 << "; stderr: " << slurp(work / "stderr.txt"));
    p.write_line(lines[i]);
    const std::optional<std::string> got = p.read_line(i == 0 ? 60 : 20);
    REQUIRE(got.has_value());
    CHECK(*got == expected[i]);
  }
  p.close_input();  // ^D
  CHECK(p.ended(20));
  CHECK(p.exit_code(20) == 0);
  CHECK(slurp(work / "stderr.txt").empty());
}

TEST_CASE("translate: file input, standard input and --stream give the library's translations in order",
          "[stream]") {
  TempDir work("stream_batch");
  const std::string run = train_copy(work);
  const std::vector<std::string> lines = copy_lines(60);
  const std::string in = work / "in.txt";
  write_file(in, joined(lines));
  const std::string expected = joined(library_translations(run, lines));
  const std::string model = "translate --beam 1 --precision fp32 --model " + run;
  for (const std::string& args : {model + " --input " + in, model + " < " + in, model + " --stream < " + in,
                                  model + " --no-stream --input " + in, "cat " + in + " | " + ROSETTA_BIN + " " + model,
                                  "cat " + in + " | " + ROSETTA_BIN + " " + model + " --stream"}) {
    INFO(args);
    const RunResult r = args.rfind("cat ", 0) == 0 ? run_shell(args + " 2>&1") : run_rosetta(args + " 2>&1");
    REQUIRE(r.exit_code == 0);
    CHECK(r.output == expected);
  }
  // --output: the same file, and no temporary left beside it.
  REQUIRE(run_rosetta(model + " --input " + in + " --output " + (work / "out.txt")).exit_code == 0);
  CHECK(slurp(work / "out.txt") == expected);
  for (const auto& e : fs::directory_iterator(work.str()))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  // --n-best: the lines' indices in input order.
  const RunResult nbest = run_rosetta(model + " --stream --n-best 2 --input " + in);
  REQUIRE(nbest.exit_code == 0);
  const auto out = rosetta::test::lines_of(nbest.output);
  REQUIRE(out.size() == 2 * lines.size());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i].rfind(std::to_string(i / 2) + " ||| ", 0) == 0);
}

TEST_CASE("translate and eval show progress on a terminal and nowhere else", "[stream]") {
  TempDir work("progress");
  const std::string run = train_copy(work);
  const std::vector<std::string> lines = copy_lines(40);
  const std::string in = work / "in.txt";
  write_file(in, joined(lines));
  const std::string model = std::string(ROSETTA_BIN) + " translate --beam 1 --precision fp32 --model " + run;
  // Standard error on a pipe (run_rosetta's): no progress line.
  const RunResult piped = run_rosetta("translate --beam 1 --model " + run + " --input " + in);
  REQUIRE(piped.exit_code == 0);
  CHECK_THAT(piped.output, !Catch::Contains("sentences/s"));
  // On a terminal: lines done, of how many, the rate; standard output holds only translations.
  const std::string seen = stderr_on_terminal(model + " < " + in, work / "out.txt");
  CHECK_THAT(seen, Catch::Contains("of 40 lines") && Catch::Contains("sentences/s") && Catch::Contains("ETA"));
  CHECK(slurp(work / "out.txt") == joined(library_translations(run, lines)));
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& l : lines) pairs.emplace_back(l, l);
  rosetta::test::write_tsv(work / "test.tsv", pairs);
  const std::string eval = stderr_on_terminal(std::string(ROSETTA_BIN) + " eval --beam 1 --model " + run +
                                                  " --test " + (work / "test.tsv"),
                                              work / "scores.txt");
  CHECK_THAT(eval, Catch::Contains("of 40 lines") && Catch::Contains("sentences/s"));
  CHECK_THAT(slurp(work / "scores.txt"), Catch::Contains("BLEU") && !Catch::Contains("sentences/s"));
}

TEST_CASE("a FIFO in place of weights, tokenizers or a checkpoint is refused at once, naming it", "[stream]") {
  TempDir work("fifo");
  // A toy German->English run (tokenizers) after 2 updates.
  rosetta::test::write_tsv(work / "toy.tsv", rosetta::test::toy_corpus(30, 1));
  const std::string run = work / "run";
  const RunResult trained = run_rosetta("train --train " + (work / "toy.tsv") + " --valid " + (work / "toy.tsv") +
                                        " --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1"
                                        " --max-tokens 256 --threads 1 --valid-bleu-sentences 2 --max-steps 2"
                                        " --validate-every 2 --out " + run);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  // `timeout`: a command that waits on the FIFO fails the test (exit 124) instead of hanging it.
  auto refused = [&](const std::string& file, const std::string& args, const std::string& input = "") {
    const std::string path = run + "/" + file, kept = work / "kept";
    fs::rename(path, kept);
    REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
    const auto start = Clock::now();
    const RunResult r = run_shell("timeout 30 " + std::string(ROSETTA_BIN) + " " + args, input);
    INFO(args << " with " << file << " a FIFO");
    CHECK(r.exit_code == 1);
    require_error(r, {path, "not a regular file (a FIFO)"});
    CHECK(Clock::now() - start < std::chrono::seconds(25));
    fs::remove(path);
    fs::rename(kept, path);
  };
  refused("best.safetensors", "translate --model " + run, "der Hund\n");
  refused("src.model", "translate --model " + run, "der Hund\n");
  refused("tgt.model", "eval --model " + run + " --test " + (work / "toy.tsv"));
  refused("best.safetensors", "export " + run + " " + (work / "ct2"));
  refused("checkpoint.safetensors", "translate --checkpoint last --model " + run, "der Hund\n");
  refused("checkpoint.safetensors", "train --resume " + run + " --max-steps 4");
  refused("src.model", "train --resume " + run + " --max-steps 4");
  refused("metrics.jsonl", "report " + run + " --out " + (work / "report.html"));
  // report: without its attention section when the weights are a FIFO, saying why.
  fs::rename(run + "/best.safetensors", work / "kept");
  REQUIRE(::mkfifo((run + "/best.safetensors").c_str(), 0644) == 0);
  const RunResult report = run_shell("timeout 30 " + std::string(ROSETTA_BIN) + " report " + run + " --out " +
                                     (work / "report.html") + " 2>&1");
  INFO(report.output);
  CHECK(report.exit_code == 0);
  CHECK_THAT(slurp(work / "report.html") + report.output, Catch::Contains("not a regular file (a FIFO)"));
  fs::remove(run + "/best.safetensors");
  fs::rename(work / "kept", run + "/best.safetensors");
  // The run is whole again: it still translates.
  REQUIRE(run_rosetta("translate --model " + run, "der Hund\n").exit_code == 0);
}
