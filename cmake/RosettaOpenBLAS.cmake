# Defines the imported target rosetta_openblas: Debian's OpenMP build of OpenBLAS
# (libopenblas-openmp-dev), so BLAS threads and our OpenMP loops share one pool. Debian installs
# it beside the pthread build; pick it explicitly.
#
# Sets RosettaOpenBLAS_FOUND, and ROSETTA_OPENBLAS_DIR (the library's directory, for rpaths).
# Used by the build (cmake/RosettaDeps.cmake) and installed with the package, so that
# find_package(rosetta) recreates the same target. Needs OpenMP::OpenMP_CXX.
find_path(ROSETTA_CBLAS_INCLUDE cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
find_library(ROSETTA_OPENBLAS openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
if(ROSETTA_CBLAS_INCLUDE AND ROSETTA_OPENBLAS)
  set(RosettaOpenBLAS_FOUND TRUE)
  if(NOT TARGET rosetta_openblas)
    add_library(rosetta_openblas INTERFACE IMPORTED)
    set_target_properties(rosetta_openblas PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${ROSETTA_CBLAS_INCLUDE}"
      INTERFACE_LINK_LIBRARIES "${ROSETTA_OPENBLAS};OpenMP::OpenMP_CXX")
  endif()
  get_filename_component(ROSETTA_OPENBLAS_DIR "${ROSETTA_OPENBLAS}" DIRECTORY)
else()
  set(RosettaOpenBLAS_FOUND FALSE)
endif()
