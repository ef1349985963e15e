#!/usr/bin/env bash
# Install test: builds rosetta in BUILD_DIR (default `build`, reused: normally nothing to do),
# installs it into a temporary prefix, then configures, builds and runs every example
# (examples/<name>/CMakeLists.txt, whose executable is called <name>) against that prefix
# alone, as a user of the installed package would. Fails on any error.
#
# Examples run without arguments, except `translate`: it gets a tiny run directory trained
# here by the installed `rosetta train` on a toy corpus, and sentences to translate. `charlm`
# is also stopped and resumed on two thread replicas: its weights must equal a straight run's;
# and run on a simulated misdetected OpenBLAS core: it must run on the CPU's own (rosetta::start).
# `charlm` is a user's model trained with the training library alone (it links rosetta::train):
# it must load no library of the layers above train (data, translator, report).
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
run "$work/headers.log" bash "$root/scripts/test-installed-headers.sh" --prefix "$prefix"

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
  # "rosetta 0.2.1 (commit 1a2b3c4)", -dirty after it where the tree had changes, or "unknown"
  [[ $got =~ ^rosetta\ ${version//./\\.}\ \(commit\ ([0-9a-f]+(-dirty)?|unknown)\)$ ]] ||
    fail "rosetta --version printed '$got', package is $version"
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

# ---------------------------------------------------------------- a toy run for `translate`
# 200 German/English pairs from templates, and a model small enough to learn them in seconds.
toy_run=$work/toy-run
toy_sentences=("der Hund sieht den Ball." "die Frau hat das Auto.")
make_toy_run() {
  local subjects=("der Hund|the dog" "die Katze|the cat" "der Mann|the man" "die Frau|the woman"
                  "das Kind|the child")
  local verbs=("sieht|sees" "hat|has" "sucht|looks for" "mag|likes")
  local objects=("den Ball|the ball" "das Buch|the book" "die Blume|the flower" "den Apfel|the apple"
                 "den Tisch|the table" "das Haus|the house" "die Tür|the door" "den Baum|the tree"
                 "das Auto|the car" "die Uhr|the clock")
  local s v o
  for s in "${subjects[@]}"; do for v in "${verbs[@]}"; do for o in "${objects[@]}"; do
    printf '%s %s %s.\t%s %s %s.\n' "${s%|*}" "${v%|*}" "${o%|*}" "${s#*|}" "${v#*|}" "${o#*|}"
  done; done; done >"$work/toy.tsv"
  run "$work/toy-train.log" "$prefix/bin/rosetta" train --train "$work/toy.tsv" \
    --valid "$work/toy.tsv" --out "$toy_run" --d-model 32 --heads 2 --ff 64 --encoder-layers 1 \
    --decoder-layers 1 --vocab-size 70 --max-tokens 256 --max-steps 300 --warmup 50 --lr 0.005 \
    --validate-every 0 --threads 1 --dropout 0
}

# run_translate EXE: translates toy_sentences given as arguments, then on stdin; it must print
# one non-empty line per sentence, the same both ways.
run_translate() {
  local exe=$1 got stdin lines i
  got=$("$exe" "$toy_run" "${toy_sentences[@]}") || fail "translate exited with status $?"
  mapfile -t lines <<<"$got"
  [[ ${#lines[@]} -eq ${#toy_sentences[@]} ]] ||
    fail "translate printed ${#lines[@]} lines for ${#toy_sentences[@]} sentences: '$got'"
  for i in "${!lines[@]}"; do
    [[ -n ${lines[i]} ]] || fail "translate printed an empty line for '${toy_sentences[i]}'"
    echo "  ${toy_sentences[i]} -> ${lines[i]}"
  done
  stdin=$(printf '%s\n' "${toy_sentences[@]}" | "$exe" "$toy_run") ||
    fail "translate (sentences on stdin) exited with status $?"
  [[ $stdin == "$got" ]] || fail "translate printed '$stdin' from stdin, '$got' from arguments"
}

# check_charlm_resume EXE: 6 updates straight, and 3 + save + resume + 3, on 2 thread
# replicas, end with the same weights (the checksum charlm prints).
check_charlm_resume() {
  local exe=$1 straight resumed args=(--threads 2 --replicas 2 --batch 8)
  straight=$("$exe" --steps 6 "${args[@]}" | sed -n 's/^weights //p') || fail "charlm exited with status $?"
  "$exe" --steps 3 "${args[@]}" --save "$work/charlm.safetensors" >/dev/null || fail "charlm --save failed"
  resumed=$("$exe" --steps 6 "${args[@]}" --resume "$work/charlm.safetensors" | sed -n 's/^weights //p') ||
    fail "charlm --resume exited with status $?"
  [[ -n $straight && $straight == "$resumed" ]] ||
    fail "charlm: stopped and resumed, the weights are $resumed, straight through $straight"
  echo "  charlm stopped at 3 and resumed: weights $resumed, as straight through"
}

# check_charlm_start EXE: on a CPU that OpenBLAS misdetects (played by rosetta::start's test hook,
# core/include/rosetta/core/start.h), charlm runs on the CPU's own core after the self-test, as
# the rosetta CLI does; its first line ends with kernels_summary().
check_charlm_start() {
  local exe=$1 out line
  out=$(env -u OPENBLAS_CORETYPE -u ROSETTA_BLAS_CORE_WAS -u ROSETTA_BLAS_SELF_TEST_FAILED \
    ROSETTA_TEST_BLAS_MISDETECT=Prescott "$exe" --steps 1) || fail "charlm on a misdetected core exited with status $?"
  line=${out%%$'\n'*}
  if [[ $line == *"CPU SSE3"* || $line == *"CPU generic"* ]]; then
    echo "  charlm on a misdetected core: skipped (this CPU has nothing better than Prescott)"
    return
  fi
  [[ $line == *"chosen by rosetta after a self-test: OpenBLAS picked Prescott"* ]] ||
    fail "charlm on a core OpenBLAS misdetected did not take the CPU's own: '$line'"
  echo "  charlm on a misdetected core (Prescott) runs on$(sed -n 's/.*fp32 GEMM: OpenBLAS \([A-Za-z]*\).*/ \1/p' <<<"$line"), as the CLI"
}

if [[ -x $prefix/bin/rosetta ]]; then
  make_toy_run
  echo "test-install: trained a toy run with the installed rosetta"
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
  if [[ $name == charlm ]]; then
    above=$(ldd "$exe" | grep -oE 'librosetta_(data|translator|report)\.so[.0-9]*' | tr '\n' ' ' || true)
    [[ -z $above ]] || fail "charlm links rosetta::train alone, yet loads $above"
    echo "test-install: charlm (nn and train only) loads no data, translator or report library"
  fi
  if [[ $name != translate ]]; then
    echo "test-install: running $name"
    (cd "$out" && "$exe") || fail "$name exited with status $?"
    [[ $name != charlm ]] || check_charlm_resume "$exe"
    [[ $name != charlm ]] || check_charlm_start "$exe"
  elif [[ -d $toy_run ]]; then
    echo "test-install: running translate on the toy run"
    (cd "$out" && run_translate "$exe")
  else
    echo "test-install: translate: skipped (no rosetta CLI installed to train its model)"
    continue
  fi
  count=$((count + 1))
done
[[ $count -gt 0 ]] || fail "no example was built"
echo "test-install: OK ($count examples against rosetta $version)"
