# Install rules and the CMake package, so that other projects can write
#
#   find_package(rosetta REQUIRED)
#   target_link_libraries(app PRIVATE rosetta::rosetta)   # or rosetta::nn, rosetta::train, ...
#
# `cmake --install build --prefix PREFIX` installs:
#   PREFIX/include/rosetta/<layer>/*.h, rosetta/rosetta.h (umbrella), rosetta/version.h
#     (not <layer>/internal/: headers internal to rosetta)
#   PREFIX/lib/librosetta_<layer>.so*                    (rpath: $ORIGIN, OpenMP OpenBLAS dir)
#   PREFIX/bin/rosetta                                   (when the CLI is built)
#   PREFIX/lib/cmake/rosetta/rosettaConfig.cmake, rosettaConfigVersion.cmake,
#     rosettaTargets.cmake, RosettaOpenBLAS.cmake
# Every installed path is relative to PREFIX, which may be chosen at install time.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ROSETTA_LAYERS core autograd nn optim data train translator report)
set(ROSETTA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rosetta)

# ---------------------------------------------------------------- usage requirements
# The public headers are C++20; say so, so consumers compile them as C++20 too.
foreach(layer ${ROSETTA_LAYERS})
  target_compile_features(rosetta_${layer} PUBLIC cxx_std_20)
endforeach()

# rosetta/version.h (generated) and the umbrella header rosetta/rosetta.h, on the aggregate.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
  ${PROJECT_BINARY_DIR}/include/rosetta/version.h @ONLY)
target_include_directories(rosetta INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# ---------------------------------------------------------------- rpaths
# Installed libraries find each other beside themselves, and the executable finds them in
# ../lib; both already carry the OpenMP OpenBLAS directory (CMAKE_INSTALL_RPATH, RosettaDeps).
# $ORIGIN keeps the install relocatable (the prefix is only known at install time).
foreach(layer ${ROSETTA_LAYERS})
  set_property(TARGET rosetta_${layer} APPEND PROPERTY INSTALL_RPATH "$ORIGIN")
endforeach()

# ---------------------------------------------------------------- files
# A layer's internal/ headers (core's fused ops of training: rosetta/core/internal/) serve the
# layers above it in this build only, and are not installed (scripts/test-installed-headers.sh).
foreach(layer ${ROSETTA_LAYERS})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/include/rosetta
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "internal" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/rosetta/rosetta.h
  ${PROJECT_BINARY_DIR}/include/rosetta/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rosetta)

list(TRANSFORM ROSETTA_LAYERS PREPEND rosetta_ OUTPUT_VARIABLE rosetta_layer_targets)
install(TARGETS ${rosetta_layer_targets} rosetta EXPORT rosettaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(TARGET rosetta_exe)
  file(RELATIVE_PATH bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
  set_property(TARGET rosetta_exe APPEND PROPERTY INSTALL_RPATH "$ORIGIN/${bin_to_lib}")
  install(TARGETS rosetta_exe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# ---------------------------------------------------------------- the package
install(EXPORT rosettaTargets NAMESPACE rosetta:: DESTINATION ${ROSETTA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rosettaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rosettaConfig.cmake INSTALL_DESTINATION ${ROSETTA_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rosettaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rosettaConfig.cmake
  ${PROJECT_BINARY_DIR}/rosettaConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/RosettaOpenBLAS.cmake
  DESTINATION ${ROSETTA_CMAKE_DIR})
