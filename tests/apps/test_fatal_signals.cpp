// A fatal signal that reaches the CLI is one line naming the kernel, the kernels in use and the
// workaround, before the signal's default action (apps/fatal_signals.h): raised in a child
// process inside a kernel's scope and outside any; and the CLI's warning where a kernel failed
// its start-up check (the fault injected by ROSETTA_TEST_KERNEL_FAULT), the command going on.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "cli_support.h"
#include "fatal_signals.h"
#include "kernels/bf16_kernel.h"
#include "kernels/dispatch.h"
#include "kernels/f32_kernel.h"
#include "kernels/kernel_check.h"

namespace {

struct Died {
  int signal = 0;      // the signal that ended the child, 0 where it exited
  std::string said;  // what it wrote on stderr
};

// Forks a child that installs the CLI's handler and raises `sig`, inside a bf16 AMX kernel's
// scope where `in_kernel`.
Died raise_in_child(int sig, bool in_kernel) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    rosetta::cli::report_fatal_signals();
    if (in_kernel) {
      const rosetta::detail::KernelScope running("bf16", "AMX");
      raise(sig);
    } else {
      raise(sig);
    }
    _exit(0);  // not reached: the signal's default action ends the child
  }
  close(fds[1]);
  Died d;
  char buf[1024];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) d.said.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) d.signal = WTERMSIG(status);
  return d;
}

}  // namespace

TEST_CASE("a fatal signal in a kernel is one line naming it, then the signal's default action", "[fatal]") {
  for (const auto& [sig, what] : {std::pair{SIGILL, "illegal instruction (SIGILL)"},
                                  std::pair{SIGSEGV, "invalid memory access (SIGSEGV)"},
                                  std::pair{SIGBUS, "bus error (SIGBUS)"},
                                  std::pair{SIGFPE, "arithmetic exception (SIGFPE)"}}) {
    const Died d = raise_in_child(sig, true);
    INFO(d.said);
    CHECK(d.signal == sig);
    CHECK(d.said.rfind(std::string("rosetta: fatal: ") + what + " in the bf16 kernel AMX; the kernels in use: ", 0) == 0);
    CHECK(d.said.find("ROSETTA_AMX=0") != std::string::npos);
    CHECK(d.said.find('\n') == d.said.size() - 1);  // one line
  }
  const Died outside = raise_in_child(SIGILL, false);
  INFO(outside.said);
  CHECK(outside.signal == SIGILL);
  CHECK(outside.said.rfind("rosetta: fatal: illegal instruction (SIGILL) outside rosetta's own kernels; ", 0) == 0);
}

TEST_CASE("the crash line names the kernels chosen so far, and stays one line when cut", "[fatal]") {
  (void)rosetta::detail::f32_kernel();  // a choice made: fp32 is in use
  char line[1024];
  const size_t n = rosetta::cli::fatal_signal_line(SIGILL, line, sizeof line);
  const std::string s(line, n);
  CHECK(s.find(std::string("the kernels in use: fp32 ") +
               (rosetta::detail::f32_kernel() ? rosetta::detail::f32_kernel()->name : "none")) != std::string::npos);
  char small[40];
  const size_t cut = rosetta::cli::fatal_signal_line(SIGILL, small, sizeof small);
  CHECK(cut == sizeof small - 1);
  CHECK(small[cut - 1] == '\n');
}

TEST_CASE("rosetta warns in one line where a kernel failed its start-up check, and runs on", "[fatal]") {
  const auto here = rosetta::detail::f32_kernels_here();
  if (here.empty()) {
    WARN("this CPU runs none of rosetta's packed fp32 kernels: nothing to fault");
    return;
  }
  const std::string key = rosetta::detail::check_key("fp32", here[0]->name);
  const rosetta::test::RunResult r =
      rosetta::test::run_shell("ROSETTA_TEST_KERNEL_FAULT=" + key + ":crash " + ROSETTA_BIN + " --version");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string line = std::string("rosetta: warning: the fp32 kernel ") + here[0]->name +
                           " failed its start-up check on this CPU (killed by SIGILL): fp32 products by packed weights run on ";
  CHECK(r.output.find(line) != std::string::npos);
  CHECK(r.output.find("rosetta 0.2.1") != std::string::npos);
}
