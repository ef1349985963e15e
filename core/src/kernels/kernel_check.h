// The start-up check: every kernel proves itself on this CPU before the dispatch lets a product
// use it (see README.md beside this file, "How a kernel is checked before use").
//
// cpuid says which instructions a CPU has; it does not say that the compiler emitted them right,
// that the OS set up their state, or that a hypervisor passes them through (rosetta 0.2.0 died
// with SIGILL on every Xeon with AMX: the tiles' configuration had been optimized away). So the
// first time the process asks the dispatch for a kernel, each kernel this CPU would run
// (f32_kernels_here(), bf16_kernels_here(), int8_kernels_here()) multiplies one small product,
// sizes off every tile edge, against the plain reference GEMMs (reference.h): fp32 and bf16
// within fp32 summation of the float64 reference, int8 bit for bit. The AMX kernels first load
// the tiles' configuration and read it back (amx.h); the bf16 kernels also run the
// instruction-rate probes of bf16_dot_speedup() once.
//
// The checks run in a child process (fork), one after the other, each announcing itself on a
// pipe: a check that kills the child (SIGILL, SIGSEGV, ...), gets a wrong result or gives no
// answer within the timeout fails, and the next child goes on with the kernels after it. A kernel
// that failed is out of the dispatch for this process: the next one on its list runs. In all a
// few milliseconds, once per process (docs/results/machines.md has the measurement).
//
// Environment:
//   ROSETTA_KERNEL_CHECK_TIMEOUT=<seconds>  how long a check may take (10)
//   ROSETTA_TEST_KERNEL_FAULT=<key>:<fault>[,...]  test hook: the check of the kernel named
//       makes the fault happen in the child: crash (raises SIGILL), wrong (one element of the
//       product off) or hang (never answers). Keys are check_key()'s: "bf16-amx", "int8-avx512-vnni",
//       "fp32-avx-512", "int8-amx-int8-modelled", ...
#pragma once

#include <string>
#include <vector>

#include "dispatch.h"

namespace rosetta::detail {

struct KernelCheck {
  const char* precision;  // "fp32" (products by packed weights), "bf16" or "int8"
  const char* kernel;     // its name (F32Kernel::name, ...)
  const void* id;         // the kernel's descriptor
  std::string failure;    // how it failed ("killed by SIGILL", "wrong result: ...", "no answer within 10 s"); "" passed
};

struct KernelChecks {
  std::vector<KernelCheck> checks;  // one per kernel this CPU runs, lists in order
  // Where the checks could not run (no child process could be started): why, and the kernels
  // run unchecked. "" otherwise.
  std::string not_run;
};

// The checks of this process, run at the first call (by the dispatch, or by rosetta::start).
const KernelChecks& kernel_checks();

// False where `kernel` failed its check.
bool passed_check(const void* kernel);

// "bf16-amx": a check's precision and kernel in lower case, every run of other characters one '-'.
std::string check_key(const char* precision, const char* kernel);

}  // namespace rosetta::detail
