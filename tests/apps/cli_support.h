// Helpers for the CLI tests: temporary directories, running the binary (in the foreground or
// the background), the checks of a failed run, small corpora, and an XML well-formedness check
// for the SVG files.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rosetta/core/safetensors.h"

namespace rosetta::test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("rosetta_" + tag + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh, stdout and stderr together, standard input `stdin_text` (or
// /dev/null), and captures its output.
inline RunResult run_shell(const std::string& command, const std::string& stdin_text = "") {
  std::string cmd = "{ " + command + "; } 2>&1";
  std::string input_file;
  if (!stdin_text.empty()) {
    input_file = (fs::temp_directory_path() / ("rosetta_stdin_" + std::to_string(std::random_device{}()))).string();
    std::ofstream(input_file) << stdin_text;
    cmd += " < " + input_file;
  } else {
    cmd += " < /dev/null";
  }
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (!input_file.empty()) fs::remove(input_file);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Runs the rosetta binary with `args` (a shell-quoted string) and captures its output.
inline RunResult run_rosetta(const std::string& args, const std::string& stdin_text = "") {
  return run_shell(std::string(ROSETTA_BIN) + " " + args, stdin_text);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON objects of a .jsonl file (metrics.jsonl, results.jsonl, ...), one per line; a line
// that is not JSON fails the test, naming it.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    INFO(path << ": " << line);
    REQUIRE_FALSE(j.is_discarded());
    out.push_back(std::move(j));
  }
  return out;
}

// (step, value of `field`) of the training records of a metrics.jsonl, in order.
inline std::vector<std::pair<int64_t, double>> train_values(const std::vector<nlohmann::json>& metrics,
                                                            const char* field) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& j : metrics)
    if (j["kind"] == "train") out.emplace_back(j["step"].get<int64_t>(), j[field].get<double>());
  return out;
}

// (step, loss) of the training records of a metrics.jsonl, in order.
inline std::vector<std::pair<int64_t, double>> train_losses(const std::vector<nlohmann::json>& metrics) {
  return train_values(metrics, "loss");
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// ---------------------------------------------------------------- checks of a failed run

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Output that would mean a crash rather than an error message.
inline void require_no_crash(const RunResult& r) {
  INFO(r.output);
  REQUIRE(r.exit_code < 128);  // not killed by a signal
  for (const char* bad : {"terminate called", "what():", "Aborted", "core dumped", "Segmentation fault",
                          "Sanitizer", "runtime error:", "stack trace", "Stack trace", "#0 0x"})
    REQUIRE_THAT(r.output, !Catch::Contains(bad));
}

// A non-zero exit with exactly one error line, the last one, holding every fragment.
inline void require_error(const RunResult& r, const std::vector<std::string>& fragments) {
  INFO(r.output);
  require_no_crash(r);
  REQUIRE(r.exit_code != 0);
  const auto lines = lines_of(r.output);
  std::vector<std::string> errors;
  for (const auto& l : lines)
    if (l.rfind("rosetta: error: ", 0) == 0) errors.push_back(l);
  REQUIRE(errors.size() == 1);
  REQUIRE(lines.back() == errors[0]);
  for (const auto& f : fragments) REQUIRE_THAT(errors[0], Catch::Contains(f));
}

// ---------------------------------------------------------------- processes in the background

inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// A rosetta process running in the background, its output in a file; `launcher` (a program and
// its arguments, such as `mpiexec -n 2`) starts it, when not empty.
struct Proc {
  pid_t pid = -1;
  std::string log;

  Proc(const std::string& args, const std::string& log_path, const std::string& launcher = "") : log(log_path) {
    std::vector<std::string> argv_s = split(launcher + " " + ROSETTA_BIN + " " + args);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = open("/dev/null", O_RDONLY);
      dup2(in, 0);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  Proc(const Proc&) = delete;
  ~Proc() {
    if (!done_) {  // a failed check left it running
      kill(pid, SIGKILL);
      wait();
    }
  }
  // Exit code, or 128 + signal.
  int wait() {
    if (!done_) {
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      record(status);
    }
    return code_;
  }
  bool running() {
    int status = 0;
    if (!done_ && waitpid(pid, &status, WNOHANG) == pid) record(status);
    return !done_;
  }
  std::string output() const { return slurp(log); }

 private:
  void record(int status) {
    done_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool done_ = false;
  int code_ = -1;
};

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The processes whose parent is `parent` (from /proc): the ranks of an mpiexec, for one.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path().string() + "/stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    // pid (comm) state ppid; comm has no spaces here (rosetta)
    if (stat >> pid >> comm >> state >> ppid && ppid == parent) out.push_back(pid_t(std::stoi(pid)));
  }
  return out;
}

// Waits (at most ~60 s) until `path` exists.
inline bool wait_for_file(const std::string& path, Proc& p) {
  for (int i = 0; i < 6000; ++i) {
    if (fs::exists(path)) return true;
    if (!p.running()) return fs::exists(path);
    sleep_ms(10);
  }
  return false;
}

// The step a run directory's checkpoint was saved at.
inline int64_t checkpoint_step(const std::string& dir) {
  const auto st = rosetta::load_safetensors(dir + "/checkpoint.safetensors");
  return std::stoll(st.metadata.at("train.step"));
}

// The checksum of a weights or checkpoint file's tensors, from its metadata: equal checksums,
// bit-identical tensors.
inline std::string tensors_checksum_of(const std::string& path) {
  return rosetta::load_safetensors(path).metadata.at("rosetta.checksum");
}

// A tiny German->English corpus from templates: "der Hund sieht die Katze" -> "the dog sees
// the cat". Deterministic.
inline std::vector<std::pair<std::string, std::string>> toy_corpus(int n, unsigned seed) {
  const std::vector<std::pair<std::string, std::string>> subj{
      {"der Hund", "the dog"}, {"die Katze", "the cat"}, {"der Mann", "the man"},
      {"die Frau", "the woman"}, {"das Kind", "the child"}, {"der Lehrer", "the teacher"}};
  const std::vector<std::pair<std::string, std::string>> verb{
      {"sieht", "sees"}, {"hört", "hears"}, {"findet", "finds"}, {"liebt", "loves"}, {"ruft", "calls"}};
  const std::vector<std::pair<std::string, std::string>> obj{
      {"den Ball", "the ball"}, {"das Haus", "the house"}, {"den Garten", "the garden"},
      {"das Auto", "the car"}, {"den Baum", "the tree"}, {"das Buch", "the book"}};
  std::mt19937 rng(seed);
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < n; ++i) {
    const auto& s = subj[rng() % subj.size()];
    const auto& v = verb[rng() % verb.size()];
    const auto& o = obj[rng() % obj.size()];
    out.emplace_back(s.first + " " + v.first + " " + o.first + ".", s.second + " " + v.second + " " + o.second + ".");
  }
  return out;
}

// A copy-task run in work/run whose model copies 3-8 symbols (0-7) after `steps` updates (150:
// about a second); more updates leave fewer near ties between its translations.
inline std::string train_copy_run(const TempDir& work, int steps) {
  const std::string dir = work / "run";
  const RunResult r = run_rosetta(
      "train --task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 --max-len 32 "
      "--max-tokens 512 --lr 3e-3 --warmup 30 --dropout 0 --label-smoothing 0 --copy-symbols 8 --copy-min-len 3 "
      "--copy-max-len 8 --copy-train-size 2000 --threads 1 --log-every 50 --max-steps " + std::to_string(steps) +
      " --validate-every " + std::to_string(steps) + " --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

inline void write_tsv(const std::string& path, const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::ofstream out(path);
  for (const auto& [s, t] : pairs) out << s << "\t" << t << "\n";
}

// Checks XML well-formedness: one root element, balanced and properly nested tags, quoted
// attributes, known entities, no stray '<' or '&'. Returns "" when well-formed, else why not.
inline std::string xml_problem(const std::string& x) {
  std::vector<std::string> stack;
  size_t i = 0, roots = 0;
  auto name_at = [&](size_t& j) {
    size_t b = j;
    while (j < x.size() && (std::isalnum((unsigned char)x[j]) || x[j] == '-' || x[j] == '_' || x[j] == ':' || x[j] == '.')) ++j;
    return x.substr(b, j - b);
  };
  while (i < x.size()) {
    if (x[i] == '&') {
      const size_t semi = x.find(';', i);
      if (semi == std::string::npos) return "unterminated entity";
      const std::string e = x.substr(i + 1, semi - i - 1);
      if (e != "amp" && e != "lt" && e != "gt" && e != "quot" && e != "apos" && e.rfind("#", 0) != 0)
        return "unknown entity &" + e + ";";
      i = semi + 1;
      continue;
    }
    if (x[i] != '<') { ++i; continue; }
    if (x.compare(i, 5, "<?xml") == 0) {
      const size_t e = x.find("?>", i);
      if (e == std::string::npos) return "unterminated declaration";
      i = e + 2;
      continue;
    }
    if (x.compare(i, 4, "<!--") == 0) {
      const size_t e = x.find("-->", i);
      if (e == std::string::npos) return "unterminated comment";
      i = e + 3;
      continue;
    }
    if (x[i + 1] == '/') {
      size_t j = i + 2;
      const std::string n = name_at(j);
      if (stack.empty() || stack.back() != n) return "mismatched </" + n + ">";
      stack.pop_back();
      while (j < x.size() && std::isspace((unsigned char)x[j])) ++j;
      if (j >= x.size() || x[j] != '>') return "bad end tag";
      i = j + 1;
      continue;
    }
    size_t j = i + 1;
    const std::string n = name_at(j);
    if (n.empty()) return "bad tag at byte " + std::to_string(i);
    if (stack.empty()) ++roots;
    while (true) {
      while (j < x.size() && std::isspace((unsigned char)x[j])) ++j;
      if (j >= x.size()) return "unterminated tag <" + n;
      if (x[j] == '>') { stack.push_back(n); ++j; break; }
      if (x[j] == '/' && j + 1 < x.size() && x[j + 1] == '>') { j += 2; break; }
      const std::string attr = name_at(j);
      if (attr.empty() || j >= x.size() || x[j] != '=') return "bad attribute in <" + n;
      ++j;
      if (j >= x.size() || (x[j] != '"' && x[j] != '\'')) return "unquoted attribute " + attr;
      const char q = x[j];
      const size_t e = x.find(q, j + 1);
      if (e == std::string::npos) return "unterminated attribute " + attr;
      if (x.substr(j + 1, e - j - 1).find('<') != std::string::npos) return "'<' in attribute " + attr;
      j = e + 1;
    }
    i = j;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return "";
}

}  // namespace rosetta::test
