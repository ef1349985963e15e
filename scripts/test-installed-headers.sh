#!/usr/bin/env bash
# The installed headers hold nothing internal to rosetta: lists every header under
# PREFIX/include, and fails naming each one that lies in an internal/ folder
# (core/include/rosetta/core/internal/: the fused ops of training and the bf16 inputs they keep,
# which cmake/RosettaInstall.cmake does not install), includes one, or declares one of their
# names.
#
#   bash scripts/test-installed-headers.sh BUILD_DIR      # installs BUILD_DIR into a temporary prefix
#   bash scripts/test-installed-headers.sh --prefix PREFIX  # an install already there
#
# Registered as a CTest test (tests/CMakeLists.txt), with a second one that runs it on a prefix
# holding an internal header, where it must fail; scripts/test-install.sh runs it on its prefix.
set -euo pipefail

if [[ ${1:-} == --prefix ]]; then
  prefix=${2:?usage: test-installed-headers.sh --prefix PREFIX}
else
  build=${1:?usage: test-installed-headers.sh BUILD_DIR}
  prefix=$(mktemp -d -t rosetta-headers.XXXXXX)
  trap 'rm -rf "$prefix"' EXIT
  if ! log=$(cmake --install "$build" --prefix "$prefix" 2>&1); then
    echo "$log" >&2
    echo "test-installed-headers: FAILED: cmake --install $build" >&2
    exit 1
  fi
fi

# The names that live in rosetta/core/internal/fused.h, as they would be declared.
internal_names='Bf16Matrix|LinearCrossEntropyResult|_fusable\(|relu_dropout_bf16\(|linear_keeping_bf16\(|linear_bf16\(|bf16_linear\(|linear_param_grads\(|relu_linear_input_grad\(|linear_cross_entropy_(forward|backward)\('
mapfile -t headers < <(cd "$prefix/include" 2>/dev/null && find . -type f -name '*.h' | sed 's|^\./||' | sort)
[[ ${#headers[@]} -gt 0 ]] || { echo "test-installed-headers: FAILED: no headers under $prefix/include" >&2; exit 1; }
bad=0
for h in "${headers[@]}"; do
  echo "  $h"
  if [[ /$h == */internal/* ]]; then
    echo "test-installed-headers: $h is an internal header" >&2
    bad=1
  fi
  if grep -nE '#[[:space:]]*include[[:space:]]*[<"][^>"]*/internal/' "$prefix/include/$h" >&2; then
    echo "test-installed-headers: $h includes an internal header (above)" >&2
    bad=1
  fi
  # Declarations only: comments may name the internal ops (ops.h says where they are).
  if sed 's|//.*$||' "$prefix/include/$h" | grep -nE "$internal_names" >&2; then
    echo "test-installed-headers: $h declares internal names (above)" >&2
    bad=1
  fi
done
if [[ $bad != 0 ]]; then
  echo "test-installed-headers: FAILED" >&2
  exit 1
fi
echo "test-installed-headers: OK (${#headers[@]} headers, none internal)"
