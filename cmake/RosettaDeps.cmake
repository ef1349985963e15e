# Finds the Debian 12 packages rosetta builds on. Nothing is downloaded.
find_package(OpenMP REQUIRED)

# The OpenMP build of OpenBLAS: the imported target rosetta_openblas (also installed with the
# package, so find_package(rosetta) recreates it).
include(${CMAKE_CURRENT_LIST_DIR}/RosettaOpenBLAS.cmake)
if(NOT RosettaOpenBLAS_FOUND)
  message(FATAL_ERROR "OpenMP OpenBLAS not found: apt-get install libopenblas-openmp-dev (scripts/install-deps.sh)")
endif()
# Load the OpenMP build at run time too, whatever the libopenblas.so.0 alternative points to.
list(APPEND CMAKE_BUILD_RPATH "${ROSETTA_OPENBLAS_DIR}")
list(APPEND CMAKE_INSTALL_RPATH "${ROSETTA_OPENBLAS_DIR}")

find_package(nlohmann_json 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)

# rosetta_layer(NAME PUBLIC_DEPS... [PRIVATE p...]): one library per layer from NAME/src/*.cpp,
# headers in NAME/include/rosetta/NAME/. Shared libraries are linked with --no-undefined, so a
# layer that uses a symbol of a layer it does not depend on fails to link.
function(rosetta_layer name)
  cmake_parse_arguments(L "" "" "PUBLIC;PRIVATE" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(NOT srcs)
    set(srcs ${CMAKE_CURRENT_BINARY_DIR}/empty.cpp)
    file(WRITE ${srcs} "// layer ${name} has no sources yet\n")
  endif()
  add_library(rosetta_${name} ${srcs})
  add_library(rosetta::${name} ALIAS rosetta_${name})
  set_target_properties(rosetta_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME rosetta_${name}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  target_include_directories(rosetta_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
  target_link_libraries(rosetta_${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
  target_link_options(rosetta_${name} PRIVATE -Wl,--no-undefined)
endfunction()
