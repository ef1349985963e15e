// A fatal signal (SIGILL, SIGSEGV, SIGBUS, SIGFPE) that reaches the CLI is reported in one line
// before its default action: which of rosetta's kernels the thread was running, the kernels in
// use, and the workaround, so that a user can report it and go on (rosetta/core/fault.h).
//
//   rosetta: fatal: illegal instruction (SIGILL) in the bf16 kernel AMX; the kernels in use: fp32
//   AVX-512, bf16 AMX; ROSETTA_AMX=0 keeps rosetta off the AMX tiles, --precision fp32 off its
//   bf16 and int8 kernels; please report this line with your CPU's model name
//   (/proc/cpuinfo)
#pragma once

#include <cstddef>

namespace rosetta::cli {

// Writes the line for `sig` (with its newline, NUL-terminated, cut to `size`) into `out` and
// returns its length. Async-signal-safe: no allocation, no locks, no stdio.
size_t fatal_signal_line(int sig, char* out, size_t size);

// Installs the handler for the four signals: it writes fatal_signal_line() to stderr, then the
// signal takes its default action (the process ends with it, and a core dump where enabled).
void report_fatal_signals();

}  // namespace rosetta::cli
