// What start() (start.h) leaves in the environment for blas_kernels() and the warnings of cpu.h:
// the variables are core's own, set by start() before it starts the program again and read here
// after, and by the program's children.
#pragma once

#include <string>

namespace rosetta::detail {

// The core OpenBLAS picked by itself before start() chose a better one (ROSETTA_BLAS_CORE_WAS);
// "" when start() chose none.
std::string blas_core_was();
// The core whose self-test failed in this program or the one that started it
// (ROSETTA_BLAS_SELF_TEST_FAILED); "" when none failed.
std::string blas_self_test_failed();

}  // namespace rosetta::detail
