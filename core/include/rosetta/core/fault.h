// What a handler of fatal signals (SIGILL, SIGSEGV, SIGBUS, SIGFPE) can say about rosetta's own
// kernels, so that a crash names the kernel and its workaround. Both functions are
// async-signal-safe: they read what the dispatch recorded, without allocating or locking. The
// rosetta CLI's handler prints them in one line before the signal's default action
// (apps/fatal_signals.cpp); a program of your own can do the same.
#pragma once

namespace rosetta {

// The kernel whose product the calling thread is running: its precision ("fp32" for products
// by packed weights, "bf16", "int8") and name ("AVX-512", "AMX", "AMX-INT8", ...); both null
// where none is.
struct RunningKernel {
  const char* precision;
  const char* kernel;
};
RunningKernel kernel_running_here();

// The kernels this process has chosen so far, e.g. "fp32 AVX-512, bf16 AMX, int8 AMX-INT8" (a
// precision appears once its first product chose a kernel, with "none" where no kernel of
// rosetta's runs it); "" before any.
const char* kernels_in_use();

}  // namespace rosetta
