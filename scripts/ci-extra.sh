#!/usr/bin/env bash
# CI steps after the normal test run (called by scripts/run-tests.sh; also runnable alone):
#
#   1. lint: scripts/lint.sh, clang-tidy's and clang's checks for dangling references and use
#      after move over every source (.clang-tidy), and that they find what tests/lint/dangling.cpp
#      plants.
#   2. asan: build with -DROSETTA_SANITIZE=ON (-fsanitize=address,undefined) into build-asan and
#      run the CTest suite under it (the install test apart); then the install test on that
#      build (scripts/test-install.sh): the ASan build installed, every example built with the
#      sanitizers against it and run, charlm's train, save and resume path included.
#   3. fuzz: build the libFuzzer targets (tests/fuzz/: safetensors parser, corpus readers, train
#      --config loader, rosetta serve's request handling) with clang-14 and
#      -fsanitize=fuzzer,address,undefined into build-fuzz (static libraries: clang puts the
#      sanitizer runtimes in executables only, and the layers link with --no-undefined), and run
#      each for FUZZ_SECONDS (default 60), from the seeds in tests/fuzz/corpus/. A crash fails
#      the step; the input is kept in build-fuzz/artifacts/.
#
#   bash scripts/ci-extra.sh [lint] [asan] [fuzz]      # default: all three
#
# Environment: LINT_BUILD_DIR (build-lint), ASAN_BUILD_DIR (build-asan), FUZZ_BUILD_DIR
# (build-fuzz), FUZZ_SECONDS (60), JOBS (nproc). Prints the time of every step at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(lint asan fuzz)
jobs=${JOBS:-$(nproc)}
asan_build=${ASAN_BUILD_DIR:-build-asan}
fuzz_build=${FUZZ_BUILD_DIR:-build-fuzz}
fuzz_seconds=${FUZZ_SECONDS:-60}

timings_title=ci-extra timings_width=28
source scripts/step-timings.sh

# Sanitizer settings for everything run below: any report fails the process, with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan.supp:print_suppressions=0}

asan() {
  # -O1: sanitizers need no more, and it compiles in about half the time of -O3.
  timed "asan: configure" cmake -S . -B "$asan_build" -DCMAKE_BUILD_TYPE=Release -DROSETTA_SANITIZE=ON \
    -DROSETTA_NATIVE=ON -DCMAKE_CXX_FLAGS=-g1 -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" >/dev/null
  timed "asan: build" cmake --build "$asan_build" -j"$jobs"
  timed "asan: ctest" ctest --test-dir "$asan_build" --output-on-failure -j"$jobs" -E '^(install|mpi):'
  timed "asan: examples (install test)" bash scripts/test-install.sh "$asan_build"
  # Open MPI's run-time plugins (dlopen'ed, unloaded at exit) leak by design and appear as
  # <unknown module>, which no suppression by library name can match: the MPI tests run with
  # address and UB checks but without leak detection.
  if ctest --test-dir "$asan_build" -N -R '^mpi:' | grep -q 'Total Tests: [1-9]'; then
    timed "asan: ctest (mpi)" env ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
      ctest --test-dir "$asan_build" --output-on-failure -j1 -R '^mpi:'
  fi
}

fuzz() {
  command -v clang++-14 >/dev/null || { echo "ci-extra: clang++-14 missing (scripts/install-deps.sh --test)" >&2; exit 1; }
  timed "fuzz: configure" env CC=clang-14 CXX=clang++-14 cmake -S . -B "$fuzz_build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROSETTA_SANITIZE=ON -DROSETTA_FUZZ=ON -DROSETTA_MPI=OFF -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
  local targets=(fuzz_safetensors fuzz_corpus fuzz_config fuzz_serve_api)
  timed "fuzz: build" cmake --build "$fuzz_build" -j"$jobs" --target "${targets[@]}"
  mkdir -p "$fuzz_build/artifacts"
  # All at once (each about FUZZ_SECONDS of wall time); the corpus each one grows lives in
  # the build directory, the seeds in the repository are only read.
  local pids=() t0=$SECONDS
  for t in "${targets[@]}"; do
    local name=${t#fuzz_} args=()
    [[ -f tests/fuzz/$name.dict ]] && args+=(-dict="tests/fuzz/$name.dict")
    mkdir -p "$fuzz_build/corpus-$name"
    "$fuzz_build/tests/$t" -max_total_time="$fuzz_seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$fuzz_build/artifacts/$name-" "${args[@]}" \
      "$fuzz_build/corpus-$name" "tests/fuzz/corpus/$name" >"$fuzz_build/$t.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for i in "${!targets[@]}"; do
    local t=${targets[$i]}
    if wait "${pids[$i]}"; then
      echo "ci-extra: $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$fuzz_build/$t.log" | grep -o '[0-9]*$') executions, no crash"
    else
      echo "ci-extra: $t FAILED (artifacts in $fuzz_build/artifacts/):" >&2
      tail -n 60 "$fuzz_build/$t.log" >&2
      failed=1
    fi
  done
  record "fuzz: run (${#targets[@]} in parallel)" "$t0"
  [[ $failed -eq 0 ]] || exit 1
}

for s in "${steps[@]}"; do
  case $s in
    lint) timed "lint" bash scripts/lint.sh ;;
    asan) asan ;;
    fuzz) fuzz ;;
    *) echo "usage: $0 [lint] [asan] [fuzz]" >&2; exit 2 ;;
  esac
done
