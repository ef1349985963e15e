#!/usr/bin/env bash
# Trains the byte-level language model of examples/charlm three ways, side by side: with
# rosetta::train (thread replicas, one per thread), with rosetta in a bare loop (forward,
# backward, step), and with its LibTorch twin (bench/charlm_torch.cpp, Debian's libtorch-dev);
# prints a table of training tokens/s: the median over rounds, and the ratios to LibTorch.
#
#   bench/charlm.sh [--threads "1 2"] [--steps 30] [--rounds 5] [--text FILE]
#
# Builds what is missing: rosetta in BUILD_DIR (default `build`), installed into
# BUILD_DIR/charlm/prefix, the example against that install (as a user would), and the twin.
# Every round runs the three at every thread count, rotating which goes first, so a drift in
# machine speed (other jobs on the cores) hits every side. Without libtorch-dev it
# says so and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads="1 2"; steps=30; rounds=5; text=$root/README.md
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    *) echo "usage: $0 [--threads LIST] [--steps N] [--rounds N] [--text FILE]" >&2; exit 2 ;;
  esac
done
if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q 'ok installed'; then
  echo "charlm: skipped, needs Debian's libtorch-dev (apt-get install libtorch-dev)"
  exit 0
fi

build=$(realpath -m "${BUILD_DIR:-$root/build}")
work=$build/charlm
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# quiet CMD...: runs CMD, showing its output only when it fails.
quiet() { "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "charlm: FAILED: $*" >&2; exit 1; }; }

[ -f "$build/CMakeCache.txt" ] || quiet cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$build" -j"$(nproc)"
quiet cmake --install "$build" --prefix "$work/prefix"
[ -f "$work/example/CMakeCache.txt" ] ||
  quiet cmake -S "$root/examples/charlm" -B "$work/example" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/example"
[ -f "$work/torch/CMakeCache.txt" ] || quiet cmake -S "$root/bench" -B "$work/torch"
quiet cmake --build "$work/torch"

ours=$work/example/charlm
torch=$work/torch/charlm_torch
results=$(mktemp)
trap 'rm -f "$log" "$results"' EXIT
# measure NAME THREADS: appends "NAME THREADS tokens/s" to the results.
measure() {
  local out cmd
  case "$1" in
    train) cmd=("$ours" "$text" --loop train --precision fp32) ;;
    bare) cmd=("$ours" "$text" --loop bare --precision fp32) ;;
    torch) cmd=("$torch" "$text") ;;
  esac
  out=$("${cmd[@]}" --steps "$steps" --threads "$2") || { echo "$out" >&2; echo "charlm: ${cmd[*]} failed" >&2; exit 1; }
  echo "$1 $2 $(echo "$out" | sed -n 's/^tokens\/s //p')" >>"$results"
  # rosetta's first line ends with the OpenBLAS kernel set
  [ "$1" = torch ] || blas=$(echo "$out" | sed -n '1s/.*threads, //p')
}
sides=(train bare torch)
for r in $(seq "$rounds"); do
  for t in $threads; do
    for i in 0 1 2; do measure "${sides[(r + i) % 3]}" "$t"; done
  done
done

cpu=$(lscpu | sed -n 's/^Model name:\s*//p' | head -n 1)
/usr/bin/python3 - "$results" "$cpu" "$blas" "$rounds" "$steps" <<'PY'
import statistics, sys
path, cpu, blas, rounds, steps = sys.argv[1:]
runs = {}
for line in open(path):
    name, threads, tps = line.split()
    runs.setdefault((name, int(threads)), []).append(float(tps))
print(f"CPU: {cpu}; OpenBLAS core: {blas}; {rounds} alternating rounds of {steps} steps "
      "(the first 2 untimed), median tokens/s")
# "paired" is the median of the rounds' own ratios: the runs of a round are back to back, so it
# is the steadier figure when other jobs come and go on the cores.
print("| threads | rosetta::train tok/s | bare loop tok/s | LibTorch tok/s | train / LibTorch (paired) | bare / LibTorch (paired) |")
print("|---|---|---|---|---|---|")
for t in sorted({t for _, t in runs}):
    a, b, c = runs[("train", t)], runs[("bare", t)], runs[("torch", t)]
    ma, mb, mc = (statistics.median(v) for v in (a, b, c))
    pa = statistics.median(x / y for x, y in zip(a, c))
    pb = statistics.median(x / y for x, y in zip(b, c))
    print(f"| {t} | {ma:,.0f} | {mb:,.0f} | {mc:,.0f} | {ma / mc:.2f}x ({pa:.2f}x) | {mb / mc:.2f}x ({pb:.2f}x) |")
for name in ("train", "bare", "torch"):
    for t in sorted({t for _, t in runs}):
        print(f"{name} at {t} thread(s), every round: " + " ".join(f"{x:.0f}" for x in runs[(name, t)]))
PY
