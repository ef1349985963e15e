#!/usr/bin/env bash
# Install test: builds rosetta in BUILD_DIR (default `build`, reused: normally nothing to do),
# installs it into a temporary prefix, then configures, builds and runs every example
# (examples/<name>/CMakeLists.txt, whose executable is called <name>) against that prefix
# alone, as a user of the installed package would. Fails on any error.
#
#   bash scripts/test-install.sh [BUILD_DIR]     # relative paths are relative to the repo root
#
# Also registered as a CTest test (tests/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath -m "${1:-${BUILD_DIR:-build}}")
jobs=$(nproc)

prefix=$(mktemp -d -t rosetta-prefix.XXXXXX)
work=$(mktemp -d -t rosetta-examples.XXXXXX)
trap 'rm -rf "$prefix" "$work"' EXIT

# run LOG CMD...: runs CMD with its output in LOG, shown only when CMD fails.
run() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "test-install: FAILED: $*" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
}
fail() {
  echo "test-install: FAILED: $*" >&2
  exit 1
}

# ---------------------------------------------------------------- build and install
if [[ ! -f $build/CMakeCache.txt ]]; then
  run "$work/configure.log" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
run "$work/build.log" cmake --build "$build" -j"$jobs"
run "$work/install.log" cmake --install "$build" --prefix "$prefix"
echo "test-install: installed into $prefix"

config_dir=$prefix/lib/cmake/rosetta
[[ -f $config_dir/rosettaConfig.cmake ]] || fail "no $config_dir/rosettaConfig.cmake"
version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$config_dir/rosettaConfigVersion.cmake")
[[ -n $version ]] || fail "no PACKAGE_VERSION in rosettaConfigVersion.cmake"
# The package must not point back into the source or build tree.
if grep -rl -e "$root/" -e "$build" "$config_dir" "$prefix/include"; then
  fail "installed files above refer to $root or $build"
fi
if [[ -x $prefix/bin/rosetta ]]; then
  got=$("$prefix/bin/rosetta" --version)
  [[ $got == "rosetta $version" ]] || fail "rosetta --version printed '$got', package is $version"
  echo "test-install: $got"
fi

# Build the examples with the compiler (and sanitizers) the library was built with.
cache_value() { sed -n "s/^$1:[A-Z]*=\(.*\)$/\1/p" "$build/CMakeCache.txt"; }
example_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix")
cxx=$(cache_value CMAKE_CXX_COMPILER)
[[ -z $cxx ]] || example_args+=(-DCMAKE_CXX_COMPILER="$cxx")
if [[ $(cache_value ROSETTA_SANITIZE) == ON ]]; then
  example_args+=(-DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer")
fi

# ---------------------------------------------------------------- the examples
count=0
for dir in "$root"/examples/*/; do
  name=$(basename "$dir")
  [[ -f $dir/CMakeLists.txt ]] || { echo "test-install: $name: no CMakeLists.txt, skipped"; continue; }
  out=$work/$name
  run "$work/$name.configure.log" cmake -S "$dir" -B "$out" "${example_args[@]}"
  found=$(sed -n 's/^rosetta_DIR:[A-Z]*=\(.*\)$/\1/p' "$out/CMakeCache.txt")
  [[ $(realpath "$found") == "$(realpath "$config_dir")" ]] ||
    fail "$name found rosetta in '$found', not in $config_dir"
  run "$work/$name.build.log" cmake --build "$out" -j"$jobs"
  exe=$out/$name
  [[ -x $exe ]] || fail "$name: the example must build an executable called $name"
  # OpenBLAS must be Debian's OpenMP build, whatever the libopenblas.so.0 alternative says.
  blas=$(ldd "$exe" | sed -n 's/^\s*libopenblas\.so\.0 => \(\S*\).*/\1/p')
  [[ $blas == */openblas-openmp/* ]] || fail "$name loads libopenblas.so.0 from '$blas'"
  echo "test-install: running $name"
  (cd "$out" && "$exe") || fail "$name exited with status $?"
  count=$((count + 1))
done
[[ $count -gt 0 ]] || fail "no example was built"
echo "test-install: OK ($count examples against rosetta $version)"
