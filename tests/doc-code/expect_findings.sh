#!/usr/bin/env bash
# The manual's code check (scripts/check-doc-code.sh) on the fixture tests/doc-code/bad, whose
# C++ blocks all compile or are marked, whose commands all parse and whose flag list is the CLI's,
# but four: it must fail (exit status 1) and name those, each by file and line, and no other. The
# arguments (compiler, flags, include directories, the CLI) are passed on to the check, as CTest
# gives them; without --rosetta neither the commands nor the flag list are checked, and the C++
# finding alone is expected.
#
#   bash tests/doc-code/expect_findings.sh [CHECK OPTIONS...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(bash "$here/../../scripts/check-doc-code.sh" "$@" "$here/bad" 2>&1)
rc=$?
echo "$out"
failed() {
  echo "expect_findings: FAILED: $*" >&2
  exit 1
}
# The compiler's own words follow "line 48: "; they differ between compilers, but name matmul.
cxx="docs/guide.md:46: the C++ block (a fragment) does not compile: line 48: "
expected=("$cxx")
if [[ " $* " == *" --rosetta "* ]]; then
  expected+=(
    "README.md:14: rosetta translate has no option --beam-size (not in rosetta translate --help)"
    "README.md:15: rosetta has no subcommand 'fit' (rosetta --help lists: train, translate,"
    "README.md:26: the block below is not what rosetta score --help prints now")
fi
((rc == 1)) || failed "the check exited with $rc, not 1"
for e in "${expected[@]}"; do
  [[ $out == *"$e"* ]] || failed "not found: $e"
done
grep -F "$cxx" <<<"$out" | grep -q matmul || failed "the compiler's error does not name matmul"
(($(grep -c '^[^ ]*:[0-9]*: ' <<<"$out") == ${#expected[@]})) ||
  failed "expected exactly ${#expected[@]} findings (above)"
echo "expect_findings: the ${#expected[@]} expected finding(s) found, and nothing else"
