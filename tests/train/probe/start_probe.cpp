// A program of its own on the training library alone (it links rosetta::train, as
// examples/charlm), that calls rosetta::start first and then says what it runs on, one
// `key=value` a line: tests/train/test_start.cpp runs it on simulated misdetections.
#include <rosetta/core/cpu.h>
#include <rosetta/core/start.h>
#include <rosetta/train/resources.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const rosetta::StartReport started = rosetta::start(argc, argv);
  if (!started.warning.empty()) std::fprintf(stderr, "start_probe: warning: %s\n", started.warning.c_str());
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("blas_core=%s\nkernels=%s\nomp_wait_policy=%s\n", rosetta::blas_kernels().core.c_str(),
              rosetta::kernels_summary().c_str(), wait ? wait : "");
  // A call into the training library, which the program loads as charlm does.
  std::printf("size=%s\n", rosetta::train::format_size(3 << 20).c_str());
  return 0;
}
