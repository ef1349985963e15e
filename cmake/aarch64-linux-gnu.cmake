# Cross-building rosetta for aarch64 Linux on an x86-64 Debian 12 host (scripts/test-aarch64.sh):
#
#   bash scripts/aarch64-sysroot.sh                   # arm64 packages, unpacked: build-aarch64-sysroot
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DROSETTA_MPI=OFF
#
# The compiler is Debian's g++-aarch64-linux-gnu, whose C and C++ libraries live in
# /usr/aarch64-linux-gnu; every other library and header is found in the sysroot of unpacked arm64
# packages (ROSETTA_AARCH64_SYSROOT, default build-aarch64-sysroot/ in the source tree), never in
# the host's /usr. The test programs run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, which
# CTest and Catch2's test discovery use); its CPU model comes from the environment, QEMU_CPU
# (qemu-aarch64's default is `max`).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# -march=native would mean the build machine: a cross-build targets plain Armv8-A unless told.
set(ROSETTA_NATIVE OFF CACHE BOOL "Compile for this machine's CPU (-march=native)")

if(NOT ROSETTA_AARCH64_SYSROOT)
  get_filename_component(ROSETTA_AARCH64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build-aarch64-sysroot" ABSOLUTE)
endif()
set(ROSETTA_AARCH64_SYSROOT "${ROSETTA_AARCH64_SYSROOT}" CACHE PATH
  "Unpacked Debian arm64 packages (scripts/aarch64-sysroot.sh)")
# try_compile projects read the toolchain file again: hand them the sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ROSETTA_AARCH64_SYSROOT)
if(NOT EXISTS "${ROSETTA_AARCH64_SYSROOT}/.stamp")
  message(FATAL_ERROR "No aarch64 sysroot at ${ROSETTA_AARCH64_SYSROOT}: run scripts/aarch64-sysroot.sh first")
endif()
set(cross_prefix /usr/aarch64-linux-gnu)
set(cross_libdirs "${ROSETTA_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu"
  "${ROSETTA_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/openblas-openmp")

# Libraries, headers and CMake packages from the sysroot (and the cross compiler's prefix) only;
# programs (pkg-config, git, qemu) from the host.
set(CMAKE_FIND_ROOT_PATH "${ROSETTA_AARCH64_SYSROOT}" "${cross_prefix}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (sentencepiece) reads the sysroot's .pc files and prefixes their paths with it.
set(ENV{PKG_CONFIG_LIBDIR} "${ROSETTA_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${ROSETTA_AARCH64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${ROSETTA_AARCH64_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")

# GCC's note that aarch64's ABI for passing some structs changed in GCC 10 concerns code built by
# GCC 9 or older, which a build from source never links.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")

# The linker resolves the libraries' own dependencies (OpenBLAS's libgfortran) in the sysroot.
string(REPLACE ";" ":" cross_libpath "${cross_libdirs}")
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT "-Wl,-rpath-link,${cross_libpath}")
endforeach()

# qemu-user runs the tests: the dynamic loader and libc from the cross compiler's prefix (-L), the
# sysroot's libraries through the guest's LD_LIBRARY_PATH (-E: the host qemu's own is left alone).
find_program(ROSETTA_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${ROSETTA_QEMU_AARCH64};-L;${cross_prefix};-E;LD_LIBRARY_PATH=${cross_libpath}")
