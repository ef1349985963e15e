// start(): the wait policy, and OpenBLAS's core checked before main starts work: the sgemm
// self-test (run in a child process) and the choice of a better core (see start.h).
#include "rosetta/core/start.h"

#include <cblas.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/core/tensor.h"
#include "start_env.h"

extern char** environ;

namespace rosetta {

namespace {

// The environment variables of start.h.
constexpr const char* kCoreType = "OPENBLAS_CORETYPE";
constexpr const char* kCoreWas = "ROSETTA_BLAS_CORE_WAS";
constexpr const char* kSelfTest = "ROSETTA_BLAS_SELF_TEST";
constexpr const char* kFailed = "ROSETTA_BLAS_SELF_TEST_FAILED";
constexpr const char* kTimeout = "ROSETTA_BLAS_SELF_TEST_TIMEOUT";
constexpr const char* kHookMisdetect = "ROSETTA_TEST_BLAS_MISDETECT";
constexpr const char* kHookSimulated = "ROSETTA_TEST_BLAS_SIMULATED";
constexpr const char* kHookSelfTest = "ROSETTA_TEST_BLAS_SELF_TEST";

// The child's failure line starts with this; the parent quotes the rest as the reason.
constexpr const char* kChildPrefix = "rosetta: BLAS self-test: ";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && strncasecmp(a.c_str(), b.c_str(), a.size()) == 0;
}

// ------------------------------------------------------------------ the self-test (child)

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", x);
  return buf;
}

// Deterministic inputs in [-1, 1): the high bits of a 64-bit linear congruential generator.
std::vector<float> pseudo_random(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int32_t(seed >> 32)) * (1.0f / 2147483648.0f);
  }
  return v;
}

// A (M,K) row-major matrix stored as op(A) for cblas: itself with leading dimension K+3, or its
// transpose (K,M) with leading dimension M+3. The padding checks that lda is honoured.
struct Stored {
  std::vector<float> data;
  int ld;
};
Stored store(const std::vector<float>& a, int rows, int cols, bool transposed) {
  Stored s;
  s.ld = (transposed ? rows : cols) + 3;
  s.data.assign(size_t(transposed ? cols : rows) * s.ld, 1e30f);  // padding: must be ignored
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      (transposed ? s.data[size_t(j) * s.ld + i] : s.data[size_t(i) * s.ld + j]) = a[size_t(i) * cols + j];
  return s;
}

// C = alpha op(A) op(B) + beta C on one shape, for the four transpositions and two (alpha,
// beta), on the current threads, against a float64 reference by plain loops: each element must
// be within 1e-4 of alpha sum_k |a||b| (+ |beta c|), the size of fp32 rounding with room to
// spare; a kernel that gets anything wrong misses by far more. With beta = 0, C starts as NaN,
// which BLAS must not read (rosetta's products write into uninitialized memory). C has one
// extra column, which must stay untouched. "" when all pass, else the first miss. `corrupt`
// (the test hook) spoils one element, to exercise the check.
std::string check_sgemm(int M, int N, int K, int threads, bool corrupt) {
  const std::vector<float> a = pseudo_random(size_t(M) * K, 1 + M), b = pseudo_random(size_t(K) * N, 2 + N),
                           c0 = pseudo_random(size_t(M) * N, 3 + K);
  std::vector<double> ref(size_t(M) * N, 0.0), mag(size_t(M) * N, 0.0);  // sum a b, sum |a||b|
  for (int i = 0; i < M; ++i)
    for (int p = 0; p < K; ++p) {
      const double aip = a[size_t(i) * K + p];
      for (int j = 0; j < N; ++j) {
        ref[size_t(i) * N + j] += aip * b[size_t(p) * N + j];
        mag[size_t(i) * N + j] += std::fabs(aip * b[size_t(p) * N + j]);
      }
    }
  const int ldc = N + 1;
  const float pad = 12345.0f;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const Stored A = store(a, M, K, ta), B = store(b, K, N, tb);
      for (const auto& [alpha, beta] : {std::pair{1.5f, 0.0f}, std::pair{-0.75f, 1.0f}}) {
        std::vector<float> c(size_t(M) * ldc, pad);
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) c[size_t(i) * ldc + j] = beta == 0 ? NAN : c0[size_t(i) * N + j];
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                    A.data.data(), A.ld, B.data.data(), B.ld, beta, c.data(), ldc);
        if (corrupt) c[0] += 1.0f, corrupt = false;
        const std::string what = std::string("sgemm ") + (ta ? "T" : "N") + (tb ? "T" : "N") + " " +
                                 std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " (alpha " +
                                 num(alpha) + ", beta " + num(beta) + ", " + std::to_string(threads) + " thread" +
                                 (threads > 1 ? "s" : "") + ")";
        for (int i = 0; i < M; ++i) {
          if (c[size_t(i) * ldc + N] != pad) return "wrong result: " + what + " wrote past column " + std::to_string(N);
          for (int j = 0; j < N; ++j) {
            const double c_in = beta == 0 ? 0.0 : c0[size_t(i) * N + j];
            const double want = alpha * ref[size_t(i) * N + j] + beta * c_in;
            const double tol = 1e-4 * (std::fabs(alpha) * mag[size_t(i) * N + j] + std::fabs(beta * c_in));
            const double got = c[size_t(i) * ldc + j];
            if (!(std::fabs(got - want) <= tol))  // NaN fails too
              return "wrong result: " + what + ": C[" + std::to_string(i) + "," + std::to_string(j) +
                     "] = " + num(got) + ", expected " + num(want);
          }
        }
      }
    }
  return "";
}

// "" when OpenBLAS runs the core OPENBLAS_CORETYPE asked for and its sgemm is right on the
// shapes the models use (tiny to wide, odd sizes that leave partial tiles), on one thread and on
// all; else what failed. About 0.1 s.
std::string blas_self_test(bool corrupt) {
  const std::string asked = env(kCoreType), running = blas_core_name();
  if (!iequals(asked, running)) return "OpenBLAS did not accept it and runs " + running;
  const int all = get_num_threads();
  std::vector<int> counts{1};
  if (all > 1) counts.push_back(all);
  for (const int threads : counts) {
    set_num_threads(threads);
    for (const auto [m, n, k] : {std::array{1, 1, 1}, std::array{7, 13, 5}, std::array{64, 64, 64},
                                 std::array{300, 257, 129}, std::array{1024, 256, 256}}) {
      if (std::string why = check_sgemm(m, n, k, threads, corrupt); !why.empty()) return why;
      corrupt = false;
    }
  }
  return "";
}

// ------------------------------------------------------------------ the parent's side

// Runs this binary as the self-test child on `core` and waits for it (at most
// ROSETTA_BLAS_SELF_TEST_TIMEOUT seconds, 30 by default, then kills it). "" when it passed,
// else why not: its own line, an exit status, a signal or the timeout. The parent's environment
// is not touched: the child gets a copy with the two variables added.
std::string self_test_in_child(const char* argv0, const std::string& core) {
  std::vector<std::string> vars{std::string(kSelfTest) + "=1", std::string(kCoreType) + "=" + core};
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind(std::string(kSelfTest) + "=", 0) != 0 && kv.rfind(std::string(kCoreType) + "=", 0) != 0)
      vars.push_back(kv);
  }
  std::vector<char*> envp;
  for (std::string& kv : vars) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::string arg0 = argv0;
  char* child_argv[] = {arg0.data(), nullptr};

  // stdout to /dev/null, stderr into a pipe (for the child's failure line).
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::string("could not start it: ") + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, child_argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    return std::string("could not start it: ") + std::strerror(err);
  }

  double timeout = std::atof(env(kTimeout).c_str());
  if (!(timeout > 0)) timeout = 30;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  std::string output;
  int status = 0, fd = fds[0];
  bool exited = false;
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};  // fd -1 (output closed): poll only sleeps
    if (poll(&p, 1, 10) > 0) {
      char buf[512];
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) output.append(buf, size_t(n));
      else if (n == 0 || errno != EINTR) close(fd), fd = -1;
    }
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  if (!exited) {
    if (fd >= 0) close(fd);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return "no answer within " + num(timeout) + " s";
  }
  if (fd >= 0) {  // what the child wrote just before it ended
    char buf[512];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) output.append(buf, size_t(n));
    close(fd);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (const size_t at = output.find(kChildPrefix); at != std::string::npos) {
    const size_t from = at + std::strlen(kChildPrefix);
    return output.substr(from, output.find('\n', from) - from);
  }
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return name ? std::string("killed by SIG") + name : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

// In the self-test child (ROSETTA_BLAS_SELF_TEST set) runs the test and ends the process: exit
// status 0 and no output when it passes, else 1 and one line on stderr saying what failed.
// Elsewhere returns at once.
void run_blas_self_test_if_child() {
  if (!std::getenv(kSelfTest)) return;
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // a crash of the kernels leaves no core file behind
  const std::string hook = env(kHookSelfTest);
  if (hook == "crash") std::abort();
  if (hook == "hang")
    for (;;) pause();
  const std::string why = blas_self_test(hook == "wrong");
  if (!why.empty()) std::fprintf(stderr, "%s%s\n", kChildPrefix, why.c_str());
  _exit(why.empty() ? 0 : 1);
}

// Sets the environment for better kernels where OpenBLAS picked some below the CPU and they
// pass the self-test. Returns true when the process must start again for it to take effect;
// `warning` gets one line when the candidate failed.
bool choose_blas_kernels(const char* argv0, std::string& warning) {
  // The test hook's simulated misdetection: start again on the core named, and tell the next
  // process (by the marker) that this OPENBLAS_CORETYPE is ours; there it is dropped, as if
  // OpenBLAS had picked that core by itself.
  if (const std::string simulated = env(kHookSimulated); !simulated.empty()) {
    if (env(kCoreType) == simulated) unsetenv(kCoreType);
    unsetenv(kHookSimulated);
  } else if (const std::string fake = env(kHookMisdetect); !fake.empty() && env(kCoreType).empty()) {
    setenv(kCoreType, fake.c_str(), 1);
    setenv(kHookSimulated, fake.c_str(), 1);
    return true;
  }

  if (!env(kCoreType).empty()) return false;  // the user's choice, never overridden
  const BlasKernels k = blas_kernels();
  const std::string candidate = blas_core_for();
  if (!k.below_cpu() || candidate.empty() || env(kFailed) == candidate) return false;
  if (const std::string why = self_test_in_child(argv0, candidate); !why.empty()) {
    warning = "OpenBLAS picked its " + k.core + " kernels (" + isa_level_name(k.core_isa) + ") on a CPU with " +
              isa_level_name(k.cpu_isa) + "; the " + candidate + " kernels failed a self-test (" + why +
              "), so fp32 products run on " + k.core;
    setenv(kFailed, candidate.c_str(), 1);  // our children (rosetta sweep's runs) do not test it again
    return false;
  }
  setenv(kCoreType, candidate.c_str(), 1);
  setenv(kCoreWas, k.core.c_str(), 1);
  return true;
}

// libgomp reads its wait policy when it loads (start.h): passive unless the user chose. True
// when the process must start again for it.
bool want_passive_wait() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  return true;
}

}  // namespace

namespace detail {
std::string blas_core_was() { return env(kCoreWas); }
std::string blas_self_test_failed() { return env(kFailed); }
}  // namespace detail

StartReport start(int argc, char** argv, const StartOptions& options) {
  ROSETTA_CHECK(argc >= 1 && argv != nullptr && argv[argc] == nullptr, "rosetta::start: needs main's argc and argv");
  if (options.blas_kernels) run_blas_self_test_if_child();  // the self-test's child ends here
  StartReport report;
  // libgomp and OpenBLAS read their environment when they load, before main: set what both
  // need, then start again once.
  const bool wait_policy = options.passive_wait && want_passive_wait();
  const bool kernels = options.blas_kernels && choose_blas_kernels(argv[0], report.warning);
  if (wait_policy || kernels) execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  if (options.check_kernels) report.kernel_warnings = kernel_check_warnings();
  return report;
}

}  // namespace rosetta
