#!/usr/bin/env bash
# README command (2): install dependencies, build, run the whole test suite through CTest; then
# the same suite under AddressSanitizer + UBSan and a bounded libFuzzer run of each fuzz target
# (scripts/ci-extra.sh; skip them with ROSETTA_SKIP_EXTRA=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh -DROSETTA_BUILD_TESTS=ON  # everything (README command (1) may have turned the tests off)
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
if [[ -z "${ROSETTA_SKIP_EXTRA:-}" ]]; then
  bash scripts/ci-extra.sh
fi
