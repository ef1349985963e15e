#!/usr/bin/env bash
# README command (2): install dependencies, build, run the whole test suite through CTest; on an
# x86-64 host then the aarch64 stage, the tree cross-built for aarch64 and its suite run under
# qemu-user with two CPU models (scripts/test-aarch64.sh; on an aarch64 host the native suite is
# the ARM test); then the same suite under AddressSanitizer + UBSan and a bounded libFuzzer run of
# each fuzz target (scripts/ci-extra.sh). ROSETTA_SKIP_EXTRA=1 skips the stages after the native
# suite; ROSETTA_SKIP_AARCH64=1 the aarch64 stage alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh -DROSETTA_BUILD_TESTS=ON  # everything (README command (1) may have turned the tests off)
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
if [[ -n "${ROSETTA_SKIP_EXTRA:-}" ]]; then
  exit 0
fi
if [[ "$(uname -m)" == "x86_64" && -z "${ROSETTA_SKIP_AARCH64:-}" ]]; then
  bash scripts/test-aarch64.sh
fi
bash scripts/ci-extra.sh
