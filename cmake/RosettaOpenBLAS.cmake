# Defines the imported target rosetta_openblas: Debian's OpenMP build of OpenBLAS
# (libopenblas-openmp-dev), so BLAS threads and our OpenMP loops share one pool. Debian installs
# it beside the pthread build; pick it explicitly.
#
# Sets RosettaOpenBLAS_FOUND, and ROSETTA_OPENBLAS_DIR (the library's directory, for rpaths).
# Used by the build (cmake/RosettaDeps.cmake) and installed with the package, so that
# find_package(rosetta) recreates the same target. Needs OpenMP::OpenMP_CXX.
#
# Each architecture finds its own: Debian's multiarch directory of the target
# (CMAKE_LIBRARY_ARCHITECTURE, x86_64-linux-gnu or aarch64-linux-gnu, set once a language is
# enabled), under the find root of a cross-build (cmake/aarch64-linux-gnu.cmake's sysroot).
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(_rosetta_blas_arches ${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(_rosetta_blas_arches x86_64-linux-gnu aarch64-linux-gnu)
endif()
set(_rosetta_blas_inc "")
set(_rosetta_blas_lib "")
foreach(_arch IN LISTS _rosetta_blas_arches)
  list(APPEND _rosetta_blas_inc /usr/include/${_arch}/openblas-openmp)
  list(APPEND _rosetta_blas_lib /usr/lib/${_arch}/openblas-openmp)
endforeach()
find_path(ROSETTA_CBLAS_INCLUDE cblas.h PATHS ${_rosetta_blas_inc} NO_DEFAULT_PATH)
find_library(ROSETTA_OPENBLAS openblas PATHS ${_rosetta_blas_lib} NO_DEFAULT_PATH)
unset(_rosetta_blas_arches)
unset(_rosetta_blas_inc)
unset(_rosetta_blas_lib)
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
