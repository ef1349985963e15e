#!/usr/bin/env bash
# Builds bench/gemm_bench.cpp against the build tree (BUILD_DIR, default build) and runs it at 1
# and 2 threads (or the thread counts given). Uses oneDNN where Debian's libdnnl-dev is
# installed (apt-get install libdnnl-dev); rosetta itself never links it.
#   bash bench/gemm.sh [THREADS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ -f "$build/core/librosetta_core.so" ] || { echo "gemm.sh: build rosetta first (scripts/build.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
flags=(-O2 -std=c++20 -fopenmp -Icore/include -I/usr/include/x86_64-linux-gnu/openblas-openmp)
libs=(-L"$build/core" -lrosetta_core -Wl,-rpath,"$PWD/$build/core" -L$blas -lopenblas -Wl,-rpath,$blas)
if [ -f /usr/include/dnnl.hpp ]; then
  flags+=(-DROSETTA_BENCH_DNNL)
  libs+=(-ldnnl)
else
  echo "gemm.sh: no libdnnl-dev: oneDNN's column stays empty" >&2
fi
g++ "${flags[@]}" bench/gemm_bench.cpp "${libs[@]}" -o "$out/gemm_bench"
for t in "${@:-1 2}"; do
  OMP_WAIT_POLICY=passive "$out/gemm_bench" "$t"
  echo
done
