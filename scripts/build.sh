#!/usr/bin/env bash
# Configures and builds rosetta (Release, -march=native) into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
