#include "fatal_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

#include "rosetta/core/fault.h"

namespace rosetta::cli {

namespace {

// Appends text to a fixed buffer, cutting what does not fit.
struct Line {
  char* out;
  size_t size, n = 0;
  Line& operator<<(const char* s) {
    for (; s && *s && n + 1 < size; ++s) out[n++] = *s;
    out[n] = '\0';
    return *this;
  }
};

const char* what(int sig) {
  switch (sig) {
    case SIGILL: return "illegal instruction (SIGILL)";
    case SIGSEGV: return "invalid memory access (SIGSEGV)";
    case SIGBUS: return "bus error (SIGBUS)";
    case SIGFPE: return "arithmetic exception (SIGFPE)";
  }
  return "fatal signal";
}

void on_fatal_signal(int sig) {
  char buf[768];
  const size_t n = fatal_signal_line(sig, buf, sizeof buf);
  for (size_t done = 0; done < n;) {
    const ssize_t w = write(STDERR_FILENO, buf + done, n - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  // The default action now: for a fault, when the instruction runs again on return; for a
  // signal sent or raised, here (it is blocked until the handler returns).
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

size_t fatal_signal_line(int sig, char* out, size_t size) {
  if (size == 0) return 0;
  Line line{out, size};
  line << "rosetta: fatal: " << what(sig);
  const RunningKernel k = kernel_running_here();
  if (k.kernel) line << " in the " << k.precision << " kernel " << k.kernel;
  else line << " outside rosetta's own kernels";
  const char* in_use = kernels_in_use();
  line << "; the kernels in use: " << (in_use[0] ? in_use : "none chosen yet");
#if defined(__x86_64__)
  line << "; ROSETTA_AMX=0 keeps rosetta off the AMX tiles, --precision fp32 off its bf16 and int8 kernels;";
#else
  line << "; --precision fp32 keeps rosetta off its bf16 and int8 kernels;";
#endif
  line << " please report this line with your CPU's model name (/proc/cpuinfo)\n";
  if (line.n > 0 && out[line.n - 1] != '\n') out[line.n - 1] = '\n';  // cut: still one line
  return line.n;
}

void report_fatal_signals() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (const int sig : {SIGILL, SIGSEGV, SIGBUS, SIGFPE}) sigaction(sig, &action, nullptr);
}

}  // namespace rosetta::cli
