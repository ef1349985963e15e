// rosetta::start: what a program that uses rosetta does first in main, so that it runs as fast
// as the rosetta CLI (which calls it too):
//
//   int main(int argc, char** argv) {
//     for (const std::string& w : rosetta::start(argc, argv).warnings())
//       std::fprintf(stderr, "myprog: warning: %s\n", w.c_str());
//     ...
//
// Two settings must be in the environment when libgomp and OpenBLAS load, before main runs, so
// start() sets what is missing and starts the program once more (execv of /proc/self/exe with
// the same argv; the process keeps its id). Call it before anything else: before threads, files
// or output, which the second start would repeat. A program run inside another (a Python
// extension, a plugin) has no main of its own and must not call it.
//
// 1. The wait policy. libgomp's default spins at every barrier, and when another process holds
//    one of the cores a spinning thread waits out whole scheduler slices: measured under load,
//    the tiny benchmark took 2.3 s per step spinning and 0.02 s waiting passively. Unless the
//    user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), start() sets OMP_WAIT_POLICY=passive;
//    OMP_WAIT_POLICY=active keeps spinning.
//
// 2. OpenBLAS's kernels. Debian's OpenBLAS picks its kernel set ("core") from the CPU model when
//    it loads. On a model it does not know (a new Xeon whose model a hypervisor hides) it falls
//    back to the generic Prescott (SSE3) kernels without a word, and fp32 GEMMs run 3-6x slower.
//    The only cure is OPENBLAS_CORETYPE in the environment when the library loads:
//
//    OPENBLAS_CORETYPE set?      the user's (or the image's) choice: kept, whatever it is.
//    core below the CPU's ISA?   candidate = blas_core_for(); a child process (this program with
//                                ROSETTA_BLAS_SELF_TEST=1 OPENBLAS_CORETYPE=candidate, whose
//                                start() runs the test and ends it) checks its sgemm against a
//                                float64 reference. Pass: set OPENBLAS_CORETYPE=candidate,
//                                ROSETTA_BLAS_CORE_WAS=<old core> and start again. Crash, wrong
//                                result or timeout: keep the old core, say why in
//                                StartReport::warning, and set ROSETTA_BLAS_SELF_TEST_FAILED=
//                                candidate so that the program's own children (rosetta sweep's
//                                runs) do not test it again.
//
//    The test runs in a separate process because some OpenBLAS builds crash or compute garbage
//    with some cores on some CPUs: that must cost a warning, not the run. The variables are
//    rosetta's own, read by blas_kernels() (cpu.h) to say where the core came from.
//
// 3. rosetta's own kernels (core/src/kernels/): each one this CPU would run multiplies a small
//    product against a plain reference in a child process (kernel_check_warnings(), cpu.h), so
//    that a kernel that crashes, computes wrong or hangs on this CPU is never used: the next one
//    on its list runs, and StartReport::kernel_warnings says which failed and what runs instead.
//    (The dispatch runs the same checks at its first product where start() was not called.)
//
// The self-test child is the one place the library ends a process itself: it is this program
// started only to run the test, and must not go on to run main. Its exit status is 0 when the
// test passes, else 1 with one line on stderr saying what failed.
//
// Test hooks (for tests/apps/test_blas_fix.cpp and tests/train/test_start.cpp; they let any AVX2
// or AVX-512 machine play a misdetected one):
//   ROSETTA_TEST_BLAS_MISDETECT=<core>  with OPENBLAS_CORETYPE unset, start again on <core>
//       as if OpenBLAS had picked it itself (the marker ROSETTA_TEST_BLAS_SIMULATED tells the
//       next process that OPENBLAS_CORETYPE is not the user's, and is removed there, with it).
//   ROSETTA_TEST_BLAS_SELF_TEST=crash|wrong|hang  the self-test child aborts (SIGABRT), gets
//       one element wrong, or never answers.
//   ROSETTA_BLAS_SELF_TEST_TIMEOUT=<seconds>  how long the parent waits for the child (30).
#pragma once

#include <string>
#include <vector>

namespace rosetta {

struct StartOptions {
  bool passive_wait = true;  // OMP_WAIT_POLICY=passive unless the environment chose a policy
  bool blas_kernels = true;  // OpenBLAS's better core, after a self-test, where it picked one below the CPU
  bool check_kernels = true;  // rosetta's own kernels checked on this CPU now (else at their first product)
};

// What start() has to tell, for the program to say it (the library never prints).
struct StartReport {
  // One line where OpenBLAS runs kernels below the CPU and the better ones failed the self-test:
  // "OpenBLAS picked its Prescott kernels (SSE3) on a CPU with AVX-512; the Cooperlake kernels
  // failed a self-test (killed by SIGABRT), so fp32 products run on Prescott". Else empty.
  std::string warning;
  // One line per kernel of rosetta's that failed its check on this CPU (kernel_check_warnings()).
  std::vector<std::string> kernel_warnings;
  // All of them, for a program to print one a line: `warning` (where set), then kernel_warnings.
  std::vector<std::string> warnings() const {
    std::vector<std::string> all;
    if (!warning.empty()) all.push_back(warning);
    all.insert(all.end(), kernel_warnings.begin(), kernel_warnings.end());
    return all;
  }
};

// Sets the environment above and starts the program again where it must (does not return then,
// unless execv fails: then the program runs on as it is); ends the process when it is the
// self-test child. argv is main's (argv[argc] is null).
StartReport start(int argc, char** argv, const StartOptions& options = {});

}  // namespace rosetta
