#!/usr/bin/env bash
# The link check (scripts/check-links.sh) on the fixture tests/links/bad, whose links and paths all
# exist but one: it must fail (exit status 1) and name that one, README.md line 5, and no other.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(bash "$here/../../scripts/check-links.sh" "$here/bad" 2>&1)
rc=$?
echo "$out"
expected="README.md:5: dead link 'docs/guide.md': no docs/guide.md"
if [[ $rc -ne 1 ]]; then
  echo "expect_dead_link: FAILED: the check exited with $rc, not 1" >&2
  exit 1
fi
if [[ $(grep -c '^[^ ]*:[0-9]*: ' <<<"$out") -ne 1 || $out != *"$expected"* ]]; then
  echo "expect_dead_link: FAILED: expected exactly one finding: $expected" >&2
  exit 1
fi
echo "expect_dead_link: the dead link is found, and nothing else"
