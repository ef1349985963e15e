// Starting on good fp32 kernels: OpenBLAS's core, checked and mended before main does anything
// else.
//
// Debian's OpenBLAS picks its kernel set ("core") from the CPU model when it loads, before main.
// On a model it does not know (a new Xeon whose model a hypervisor hides) it falls back to the
// generic Prescott (SSE3) kernels without a word, and fp32 GEMMs run 3-6x slower. The only cure
// is OPENBLAS_CORETYPE in the environment when the library loads, so the CLI starts once more:
//
//   OPENBLAS_CORETYPE set?      the user's choice: kept, whatever it is.
//   core below the CPU's ISA?   candidate = blas_core_for(); a child process (this binary with
//                               ROSETTA_BLAS_SELF_TEST=1 OPENBLAS_CORETYPE=candidate) checks
//                               its sgemm against a float64 reference. Pass: set
//                               OPENBLAS_CORETYPE=candidate, ROSETTA_BLAS_CORE_WAS=<old core>
//                               and start again. Crash, wrong result or timeout: one warning
//                               line, keep the old core, and ROSETTA_BLAS_SELF_TEST_FAILED=
//                               candidate so that our own children (rosetta sweep's runs) do not
//                               test it again.
//
// The test runs in a separate process because some OpenBLAS builds crash or compute garbage
// with some cores on some CPUs: that must cost the user a warning, not the run.
//
// Test hooks (read only here, for tests/apps/test_blas_fix.cpp; they let any AVX2 or AVX-512
// machine play a misdetected one):
//   ROSETTA_TEST_BLAS_MISDETECT=<core>  with OPENBLAS_CORETYPE unset, start again on <core>
//       as if OpenBLAS had picked it itself (the marker ROSETTA_TEST_BLAS_SIMULATED tells the
//       next process that OPENBLAS_CORETYPE is not the user's, and is removed there, with it).
//   ROSETTA_TEST_BLAS_SELF_TEST=crash|wrong|hang  the self-test child aborts (SIGABRT), gets
//       one element wrong, or never answers.
//   ROSETTA_BLAS_SELF_TEST_TIMEOUT=<seconds>  how long the parent waits for the child (30).
#pragma once

namespace rosetta::cli {

// In the self-test child (ROSETTA_BLAS_SELF_TEST set) runs the test and ends the process: exit
// status 0 and no output when it passes, else 1 and one line on stderr saying what failed.
// Elsewhere returns at once. Call it first in main.
void run_blas_self_test_if_child();

// Sets the environment for better kernels where OpenBLAS picked some below the CPU and they
// pass the self-test (see above). Returns true when the process must start again (execv) for
// the new environment to take effect; prints one warning line when the candidate failed.
bool choose_blas_kernels(const char* argv0);

}  // namespace rosetta::cli
