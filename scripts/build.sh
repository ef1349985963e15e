#!/usr/bin/env bash
# Configures and builds rosetta (Release, -march=native) into ${BUILD_DIR:-build}.
#
#   bash scripts/build.sh [--target T]... [CMAKE_OPTION]...
#
# --target (repeatable) builds those targets alone (README command (1): `--target rosetta_exe`,
# the CLI); without it, everything. Every other argument goes to the configuration
# (-DROSETTA_NATIVE=OFF, -DROSETTA_BUILD_TESTS=OFF, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
targets=()
options=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --target) [[ $# -ge 2 ]] || { echo "build.sh: --target needs a target" >&2; exit 2; }
              targets+=(--target "$2"); shift 2 ;;
    *) options+=("$1"); shift ;;
  esac
done
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${options[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
