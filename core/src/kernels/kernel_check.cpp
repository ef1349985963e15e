// The start-up check (kernel_check.h): each kernel's small product against the reference, run in
// a child process that a crash, a wrong result or a hang cannot take the program down with.
#include "kernel_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "amx.h"
#include "bf16.h"
#include "bf16_kernel.h"
#include "f32.h"
#include "f32_kernel.h"
#include "int8.h"
#include "int8_kernel.h"
#include "reference.h"

namespace rosetta::detail {

namespace {

// The product every kernel multiplies: sizes off every tile edge (M over one 32-row block of
// AMX, N over one 32-column sliver, K with a tail after whole tiles of every kernel).
constexpr int64_t kM = 37, kN = 45, kK = 70;
// fp32 products by packed weights also cross one block of k (kF32BlockK).
constexpr int64_t kKf32 = kF32BlockK + 9;

// Deterministic values in [-1, 1): the high bits of a 64-bit linear congruential generator.
std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int32_t(seed >> 32)) * (1.0f / 2147483648.0f);
  }
  return v;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string element(int64_t i, int64_t j, double got, double want) {
  return "wrong result: C[" + std::to_string(i) + "," + std::to_string(j) + "] = " + num(got) + ", expected " + num(want);
}

// "" where every element of c (M x N) is within fp32 summation of the reference (plus the
// bias), else the first that is not. NaN fails.
std::string within(const std::vector<float>& c, const reference::Product& want, const std::vector<float>& bias,
                   int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const size_t at = size_t(i * N + j);
      const double w = want.value[at] + bias[size_t(j)];
      const double tol = double(K + 2) * std::ldexp(1.0, -23) * (want.magnitude[at] + std::fabs(bias[size_t(j)]));
      if (!(std::fabs(c[at] - w) <= tol)) return element(i, j, c[at], w);
    }
  return "";
}

// The tiles' configuration as this thread loads it, read back: "" where it is tile_config().
std::string tile_config_read_back() {
  amx::configure_tiles();
  const amx::TileConfig got = amx::stored_config(), want = amx::tile_config();
  amx::release_tiles();
  if (amx::same_config(got, want)) return "";
  return "the tile configuration read back (STTILECFG) is not the one loaded: palette " + std::to_string(got.palette) +
         ", tile 0 " + std::to_string(got.rows[0]) + " rows x " + std::to_string(got.colsb[0]) + " bytes (loaded: " +
         std::to_string(want.palette) + ", " + std::to_string(want.rows[0]) + " x " + std::to_string(want.colsb[0]) + ")";
}

std::string check_f32(const F32Kernel& k, bool corrupt) {
  const std::vector<float> a = values(kM * kKf32, 1), b = values(kN * kKf32, 2), bias = values(kN, 3);
  PackedBF32 packed;
  pack_b_f32(true, kKf32, kN, b.data(), kKf32, packed);  // a Linear's [N, K] weight
  std::vector<float> c(size_t(kM * kN));
  gemm_f32_packed(kM, a.data(), kKf32, packed, c.data(), kN, 1, bias.data(), &k);
  if (corrupt) c[7] += 1;
  return within(c, reference::gemm(kM, kN, kKf32, {a.data(), kKf32, false}, {b.data(), kKf32, true}), bias, kM, kN,
                kKf32);
}

std::string check_bf16(const Bf16Kernel& k, bool corrupt) {
  if (k.amx && !k.modelled) {
#if defined(__x86_64__)
    if (std::string why = tile_config_read_back(); !why.empty()) return why;
    time_amx_dots(2);  // bf16_dot_speedup's probe of the tiles
#endif
  } else if (!k.amx) {
    time_bf16_dots(2);  // and of VDPBF16PS (aarch64: BFMMLA) against FMAs
    time_fp32_fmas(2);
  }
  const std::vector<float> a = values(kM * kK, 4), b = values(kN * kK, 5), bias = values(kN, 6);
  std::vector<float> c(size_t(kM * kN));
  Bf16Gemm g;
  g.M = kM, g.N = kN, g.K = kK;
  g.a = {.trans = false, .f32 = a.data(), .ld = kK};
  g.b = {.trans = true, .f32 = b.data(), .ld = kK};
  g.out = {.c = c.data(), .ldc = kN, .bias = bias.data()};
  gemm_bf16(g, 1, &k);
  if (corrupt) c[7] += 1;
  return within(c, reference::gemm(kM, kN, kK, {a.data(), kK, false}, {b.data(), kK, true}, true), bias, kM, kN, kK);
}

std::string check_int8(const Int8Kernel& k, bool corrupt) {
  if (&k == &int8_amx)
    if (std::string why = tile_config_read_back(); !why.empty()) return why;
  const std::vector<float> a = values(kM * kK, 7), b = values(kN * kK, 8);
  PackedBInt8 packed;
  pack_b_int8(true, kK, kN, b.data(), kK, packed, k.w_max);
  std::vector<float> c(size_t(kM * kN));
  gemm_int8_packed(kM, a.data(), kK, packed, c.data(), kN, 1, nullptr, &k);
  if (corrupt) c[7] += 1;
  const reference::Int8Product want =
      reference::gemm_int8(kM, kN, kK, {a.data(), kK, false}, {b.data(), kK, true}, k.w_max);
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      const size_t at = size_t(i * kN + j);
      if (std::bit_cast<uint32_t>(c[at]) != std::bit_cast<uint32_t>(want.c[at]))
        return element(i, j, c[at], want.c[at]);
    }
  return "";
}

struct Candidate {
  KernelCheck check;
  std::function<std::string(bool corrupt)> run;
};

std::vector<Candidate> candidates() {
  std::vector<Candidate> all;
  for (const F32Kernel* k : f32_kernels_here())
    all.push_back({{"fp32", k->name, k, ""}, [k](bool corrupt) { return check_f32(*k, corrupt); }});
  for (const Bf16Kernel* k : bf16_kernels_here())
    all.push_back({{"bf16", k->name, k, ""}, [k](bool corrupt) { return check_bf16(*k, corrupt); }});
  for (const Int8Kernel* k : int8_kernels_here())
    all.push_back({{"int8", k->name, k, ""}, [k](bool corrupt) { return check_int8(*k, corrupt); }});
  return all;
}

// The fault the test hook asks of the check of `key` ("crash", "wrong", "hang"), or "".
std::string fault_for(const std::string& key) {
  const char* hook = std::getenv("ROSETTA_TEST_KERNEL_FAULT");
  if (!hook) return "";
  const std::string spec = hook;
  for (size_t at = 0; at <= spec.size();) {
    const size_t end = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, end - at);
    if (const size_t colon = item.find(':'); colon != std::string::npos && item.substr(0, colon) == key)
      return item.substr(colon + 1);
    at = end + 1;
  }
  return "";
}

void say(int fd, const std::string& line) {
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);
    done += size_t(n);
  }
}

// The child: checks all[from..] in turn, "b <i>" on `fd` before each and "e <i> <failure>" after,
// then ends. Never returns.
[[noreturn]] void run_child(std::vector<Candidate>& all, size_t from, int fd) {
  // The default actions, not a handler of the program's (the CLI's would report the crash).
  for (const int sig : {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGTRAP}) signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // a crash leaves no core file behind
  for (size_t i = from; i < all.size(); ++i) {
    say(fd, "b " + std::to_string(i) + "\n");
    const std::string fault = fault_for(check_key(all[i].check.precision, all[i].check.kernel));
    if (fault == "crash") raise(SIGILL);
    if (fault == "hang")
      for (;;) pause();
    std::string why;
    try {
      why = all[i].run(fault == "wrong");
    } catch (const std::exception& e) {
      why = std::string("threw: ") + e.what();
    }
    for (char& ch : why)
      if (ch == '\n') ch = ' ';
    say(fd, "e " + std::to_string(i) + " " + why + "\n");
  }
  _exit(0);
}

std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? std::string("SIG") + name : "signal " + std::to_string(sig);
}

double timeout_seconds() {
  const char* v = std::getenv("ROSETTA_KERNEL_CHECK_TIMEOUT");
  const double t = v ? std::atof(v) : 0;
  return t > 0 ? t : 10;
}

// Runs the checks all[from..] in one child and records what it said; returns the index to go on
// from (all.size() when done), or throws std::runtime_error where no child could be started.
size_t run_children_from(std::vector<Candidate>& all, size_t from, std::vector<bool>& done) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(all, from, fds[1]);
  }
  close(fds[1]);
  const double timeout = timeout_seconds();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  std::string buffer;
  long running = -1;  // the check the child announced and has not finished
  const auto take = [&](const char* chunk, size_t n) {
    buffer.append(chunk, n);
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      const std::string line = buffer.substr(0, nl);
      const size_t i = std::strtoul(line.c_str() + 2, nullptr, 10);
      if (i >= all.size()) continue;
      if (line[0] == 'b') {
        running = long(i);
        deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
      } else if (line[0] == 'e') {
        const size_t space = line.find(' ', 2);
        all[i].check.failure = space == std::string::npos ? "" : line.substr(space + 1);
        done[i] = true;
        running = -1;
      }
    }
  };
  // Reads what the child says, in ticks of 10 ms at most, until it has ended (waitpid, not the
  // pipe's end alone: a process another thread forked meanwhile may hold the pipe open too) or
  // the check under way has taken longer than the timeout.
  int status = 0, fd = fds[0];
  bool exited = false, timed_out = false;
  char chunk[512];
  while (!exited) {
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    pollfd p{fd, POLLIN, 0};  // fd -1 once the pipe ended: poll only sleeps, 1 ms
    if (poll(&p, 1, fd >= 0 ? 10 : 1) > 0) {
      const ssize_t n = read(fd, chunk, sizeof chunk);
      if (n > 0) take(chunk, size_t(n));
      else if (n == 0 || errno != EINTR) close(fd), fd = -1;
    }
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  if (fd >= 0) {  // what the child wrote just before it ended
    for (pollfd p{fd, POLLIN, 0}; poll(&p, 1, 0) > 0;) {
      const ssize_t n = read(fd, chunk, sizeof chunk);
      if (n <= 0) break;
      take(chunk, size_t(n));
    }
    close(fd);
  }
  // Where the child ended inside a check, that check failed; where it ended between checks
  // (before the first), the first not done fails with it, so that every round makes progress.
  size_t failed = running >= 0 ? size_t(running) : from;
  while (failed < all.size() && done[failed] && running < 0) ++failed;
  if (failed >= all.size()) return all.size();
  std::string why;
  if (timed_out) why = "no answer within " + num(timeout) + " s";
  else if (WIFSIGNALED(status)) why = "killed by " + signal_name(WTERMSIG(status));
  else why = "the check ended with exit status " + std::to_string(WEXITSTATUS(status));
  all[failed].check.failure = why;
  done[failed] = true;
  return failed + 1;
}

KernelChecks run_checks() {
  std::vector<Candidate> all = candidates();
  KernelChecks out;
  std::vector<bool> done(all.size(), false);
  try {
    for (size_t from = 0; from < all.size();) {
      from = run_children_from(all, from, done);
      while (from < all.size() && done[from]) ++from;
    }
  } catch (const std::runtime_error& e) {
    out.not_run = e.what();
    for (Candidate& c : all) c.check.failure.clear();
  }
  for (Candidate& c : all) out.checks.push_back(c.check);
  return out;
}

}  // namespace

std::string check_key(const char* precision, const char* kernel) {
  std::string key;
  for (const char* part : {precision, kernel}) {
    if (!key.empty()) key += '-';
    for (const char* p = part; *p; ++p) {
      const char ch = *p;
      if (std::isalnum(static_cast<unsigned char>(ch))) key += char(std::tolower(static_cast<unsigned char>(ch)));
      else if (!key.empty() && key.back() != '-') key += '-';
    }
    while (!key.empty() && key.back() == '-') key.pop_back();
  }
  return key;
}

const KernelChecks& kernel_checks() {
  static const KernelChecks checks = run_checks();
  return checks;
}

bool passed_check(const void* kernel) {
  for (const KernelCheck& c : kernel_checks().checks)
    if (c.id == kernel) return c.failure.empty();
  return true;  // not a kernel this CPU runs: never chosen anyway
}

}  // namespace rosetta::detail
