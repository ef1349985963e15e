#!/usr/bin/env bash
# The aarch64 stage of README command (2) (scripts/run-tests.sh runs it on x86-64 hosts): rosetta
# cross-built for aarch64 and its test suite run under qemu-user, twice, so that every ARM path the
# kernel dispatch can choose runs its real instructions:
#
#   1. sysroot: Debian 12's arm64 packages unpacked into build-aarch64-sysroot
#      (scripts/aarch64-sysroot.sh; the host's packages untouched).
#   2. build: cmake/aarch64-linux-gnu.cmake's cross-build into build-aarch64 (Release, no MPI):
#      the libraries, the rosetta CLI and every test program but test_apps.
#   3. ctest under QEMU_CPU=cortex-a53 (Armv8.0-A: NEON alone) and QEMU_CPU=max (SVE, BF16, I8MM,
#      DOTPROD, ...), the two passes side by side. The tests too slow under emulation, or that
#      check the source tree rather than the build, are left out by name in tests/aarch64-skip.txt,
#      each with its reason.
#   4. checkpoints: a copy-task model trained by the native x86-64 rosetta is loaded by the aarch64
#      rosetta under qemu, and one trained under qemu by the native one; each side translates the
#      same held-out lines (fp32, greedy) and the translations are equal.
#
#   bash scripts/test-aarch64.sh [sysroot] [build] [ctest] [checkpoints]   # default: all
#
# Environment: AARCH64_BUILD_DIR (build-aarch64), AARCH64_SYSROOT (build-aarch64-sysroot),
# AARCH64_CPUS (cortex-a53 max), BUILD_DIR (the native build, for step 4: build), JOBS (nproc).
# Prints the time of every step at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(sysroot build ctest checkpoints)
jobs=${JOBS:-$(nproc)}
build=${AARCH64_BUILD_DIR:-build-aarch64}
sysroot=${AARCH64_SYSROOT:-build-aarch64-sysroot}
[[ $sysroot == /* ]] || sysroot=$root/$sysroot
native=${BUILD_DIR:-build}
read -r -a cpus <<<"${AARCH64_CPUS:-cortex-a53 max}"

timings_title=test-aarch64 timings_width=34
source scripts/step-timings.sh

for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v $tool >/dev/null ||
    { echo "test-aarch64: $tool missing (scripts/install-deps.sh --test)" >&2; exit 1; }
done

build_step() {
  timed "configure" cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
    -DROSETTA_AARCH64_SYSROOT="$sysroot" -DCMAKE_BUILD_TYPE=Release -DROSETTA_MPI=OFF \
    -DROSETTA_BUILD_TESTS=ON >/dev/null
  # Every target but test_apps (tests/aarch64-skip.txt says why).
  local targets=(rosetta_exe kernel_check_probe start_probe)
  local t
  for t in $(cmake --build "$build" --target help | grep -o 'test_[a-z_]*' | sort -u); do
    [[ $t == test_apps ]] || targets+=("$t")
  done
  timed "build (${#targets[@]} targets)" cmake --build "$build" -j"$jobs" --target "${targets[@]}"
}

# The skip list's entries for one CPU model (tests/aarch64-skip.txt): one ctest -E expression.
skip_regex() {
  local cpu=$1 re="" line
  while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    if [[ $line == @* ]]; then
      [[ ${line%% *} == "@$cpu" ]] || continue
      line=${line#* }
    fi
    re+="${re:+|}${line%% -- *}"
  done <tests/aarch64-skip.txt
  # CTest runs everything when its expression does not compile: refuse instead.
  if ctest --test-dir "$build" -N -R "$re" 2>&1 | grep -q 'RegularExpression'; then
    echo "test-aarch64: tests/aarch64-skip.txt makes no valid CTest expression: $re" >&2
    return 1
  fi
  printf '%s' "$re"
}

ctest_step() {
  local pids=() t0=$SECONDS cpu i
  # The passes side by side, each with its share of the cores and its own log (the tests' scratch
  # directories are per process, so two passes over one build do not meet).
  local per=$(( jobs > ${#cpus[@]} ? jobs / ${#cpus[@]} : 1 ))
  local skips=()
  local re
  for cpu in "${cpus[@]}"; do
    re=$(skip_regex "$cpu") || exit 1
    skips+=("$re")
  done
  for i in "${!cpus[@]}"; do
    cpu=${cpus[$i]}
    QEMU_CPU=$cpu ctest --test-dir "$build" --output-on-failure -j"$per" -E "${skips[$i]}" \
      >"$build/ctest-$cpu.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for i in "${!cpus[@]}"; do
    cpu=${cpus[$i]}
    local left
    left=$(ctest --test-dir "$build" -N -R "${skips[$i]}" | grep -o 'Total Tests: [0-9]*' | grep -o '[0-9]*$')
    if wait "${pids[$i]}"; then
      echo "test-aarch64: QEMU_CPU=$cpu: $(grep -E 'tests passed' "$build/ctest-$cpu.log"); $left left out"
    else
      echo "test-aarch64: QEMU_CPU=$cpu FAILED ($build/ctest-$cpu.log):" >&2
      grep -B2 -A40 -E '\*\*\*(Failed|Timeout|Exception)|\.\.\. *Failed' "$build/ctest-$cpu.log" | tail -n 300 >&2
      sed -n '/tests passed/,$p' "$build/ctest-$cpu.log" >&2
      failed=1
    fi
    grep -E 'Total Test time' "$build/ctest-$cpu.log" | sed "s/^/test-aarch64: QEMU_CPU=$cpu: /" || true
  done
  echo "test-aarch64: left out by tests/aarch64-skip.txt:"
  grep -v -e '^#' -e '^$' tests/aarch64-skip.txt | sed 's/^/  /'
  record "ctest (${cpus[*]}, side by side)" "$t0"
  [[ $failed -eq 0 ]] || exit 1
}

# Checkpoints are architecture-independent: the native rosetta trains a copy-task model (400
# updates, a few seconds); the aarch64 rosetta under qemu loads it and translates held-out lines,
# then continues its training for 50 updates (a resume: weights, optimizer state, data position),
# which the native rosetta loads in turn. Each model's translations by the two are equal (fp32,
# greedy and a beam of 4; the copy task's margins are wide, and nothing else is compared: the two
# architectures' fp32 sums differ in their last bits).
checkpoints_step() {
  local x86=$native/rosetta arm work=$build/checkpoints
  arm=$(cd "$build" && pwd)/emulated/rosetta
  [[ -x $x86 ]] || { echo "test-aarch64: no native rosetta at $x86 (scripts/build.sh first)" >&2; exit 1; }
  [[ -x $arm ]] || { echo "test-aarch64: no aarch64 rosetta at $arm (the build step first)" >&2; exit 1; }
  rm -rf "$work"
  mkdir -p "$work"
  local copy=(--task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 1 --max-len 32
    --max-tokens 512 --lr 3e-3 --warmup 30 --dropout 0 --label-smoothing 0 --copy-symbols 8 --copy-min-len 3
    --copy-max-len 8 --copy-train-size 2000 --threads 1 --log-every 100)
  run_logged() {  # run_logged LOG CMD...: CMD's output to LOG, shown if it fails
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { echo "test-aarch64: failed: $*" >&2; tail -n 30 "$log" >&2; exit 1; }
  }
  # 40 held-out lines of 3-8 symbols (the model was trained on lines of that length).
  awk 'BEGIN { srand(71); for (i = 0; i < 40; i++) { n = 3 + int(rand() * 6); l = "";
       for (k = 0; k < n; k++) l = l (k ? " " : "") int(rand() * 8); print l } }' >"$work/lines.txt"
  run_logged "$work/x86-train.log" "$x86" train "${copy[@]}" --max-steps 400 --validate-every 400 --out "$work/run"
  compare() {  # compare RUN WHAT: both rosettas translate RUN's model; equal or fail
    local run=$1 what=$2 beam
    for beam in 1 4; do
      run_logged "$work/x86.err" "$x86" translate --model "$run" --precision fp32 --beam $beam --threads 1 \
        --input "$work/lines.txt" --output "$work/x86.txt"
      for cpu in "${cpus[@]}"; do
        QEMU_CPU=$cpu run_logged "$work/arm.err" "$arm" translate --model "$run" --precision fp32 --beam $beam \
          --threads 1 --input "$work/lines.txt" --output "$work/arm-$cpu.txt"
        if ! cmp -s "$work/x86.txt" "$work/arm-$cpu.txt"; then
          echo "test-aarch64: $what: the translations (beam $beam) differ, x86-64 < > aarch64 ($cpu):" >&2
          diff "$work/x86.txt" "$work/arm-$cpu.txt" >&2 || true
          exit 1
        fi
      done
    done
    echo "test-aarch64: $what: x86-64 and aarch64 (${cpus[*]}) translate the $(wc -l <"$work/lines.txt") lines alike" \
      "(fp32, beam 1 and 4; $(grep -c . "$work/x86.txt") non-empty)"
  }
  compare "$work/run" "a model trained on x86-64"
  QEMU_CPU=${cpus[-1]} run_logged "$work/arm-train.log" "$arm" train --resume "$work/run" --max-steps 450
  grep -q "stopped at step 450" "$work/arm-train.log" ||
    { echo "test-aarch64: the aarch64 resume did not reach step 450:" >&2; tail -n 5 "$work/arm-train.log" >&2; exit 1; }
  compare "$work/run" "the same model trained 50 more updates on aarch64 (${cpus[-1]})"
}

for s in "${steps[@]}"; do
  case $s in
    sysroot) timed "sysroot" bash scripts/aarch64-sysroot.sh "$sysroot" ;;
    build) build_step ;;
    ctest) ctest_step ;;
    checkpoints) timed "checkpoints (x86-64 <-> aarch64)" checkpoints_step ;;
    *) echo "usage: $0 [sysroot] [build] [ctest] [checkpoints]" >&2; exit 2 ;;
  esac
done
