#!/usr/bin/env bash
# Lint (a CI step of scripts/ci-extra.sh; also runnable alone). First the link check
# (scripts/check-links.sh: every relative link and repository path in the Markdown files exists;
# it needs nothing but bash). Then clang-tidy-14 with the checks of .clang-tidy (dangling
# references and pointers, use after move) over every source the build compiles, from the compile
# commands of a clang configuration in LINT_BUILD_DIR (default build-lint; configured, never
# built). Any finding fails.
#
# Then the lint is checked against tests/lint/dangling.cpp: clang must warn on exactly the lines
# marked `// dangles` there (references kept into temporaries), and nowhere else (the patterns
# the API changed to make correct).
#
#   bash scripts/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${LINT_BUILD_DIR:-build-lint}
jobs=${JOBS:-$(nproc)}
bash scripts/check-links.sh
for tool in clang++-14 clang-tidy-14 run-clang-tidy-14; do
  command -v $tool >/dev/null || { echo "lint: $tool missing (scripts/install-deps.sh --test)" >&2; exit 1; }
done

CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DROSETTA_NATIVE=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
log=$build/lint.log
if ! run-clang-tidy-14 -p "$build" -j"$jobs" -quiet >"$log" 2>&1 || grep -qE '(warning|error): ' "$log"; then
  grep -E '(warning|error): ' "$log" | sort -u >&2 || tail -n 40 "$log" >&2
  echo "lint: FAILED (the findings above; all of it in $log)" >&2
  exit 1
fi
echo "lint: $(grep -c '"file"' "$build/compile_commands.json") sources, no findings"

# The lint itself: the warnings of tests/lint/dangling.cpp are on its `dangles` lines.
probe=tests/lint/dangling.cpp
flags=(-std=c++20)
for dir in */include/rosetta; do flags+=(-I"${dir%/rosetta}"); done
flags+=(-isystem /usr/include/x86_64-linux-gnu/openblas-openmp)
expected=$(grep -n '// dangles$' "$probe" | cut -d: -f1 | tr '\n' ' ')
# (clang-tidy fails on them, as on any finding: its status is not what is checked here.)
got=$({ clang-tidy-14 "$probe" -- "${flags[@]}" 2>/dev/null || true; } |
  grep -E "$probe:[0-9]+:[0-9]+: (fatal )?(error|warning): " | sed "s#^.*$probe:\([0-9]*\):.*#\1#" | sort -n |
  tr '\n' ' ' || true)
if [[ -z $expected || $got != "$expected" ]]; then
  echo "lint: FAILED: $probe: clang reported lines '$got', expected the dangling ones, '$expected'" >&2
  exit 1
fi
echo "lint: $probe: all $(wc -w <<<"$expected") kept references into temporaries found, nothing else"
