#!/usr/bin/env bash
# Rewrites the flag lists in docs/cli.md from a build's own help: the fenced block after each line
# `<!-- rosetta COMMAND --help -->` becomes the output of `rosetta COMMAND --help` (and after
# `<!-- rosetta --help -->`, that of `rosetta --help`). Run it after changing a command's flags.
#
#   bash scripts/update-cli-docs.sh [ROSETTA_BIN]     # default: build/rosetta
#   bash scripts/update-cli-docs.sh --help-of 'COMMAND' ROSETTA_BIN
#                                      # prints that block as written (scripts/check-doc-code.sh)
set -euo pipefail
help_of() {  # COMMAND (empty: the tool's own) BIN
  # As `rosetta` (the usage line names argv[0]), without trailing blanks or blank lines.
  # shellcheck disable=SC2086
  (exec -a rosetta "$2" $1 --help </dev/null) | sed 's/[[:space:]]*$//' |
    sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
}
if [[ ${1:-} == --help-of ]]; then
  help_of "$2" "$3"
  exit
fi
cd "$(dirname "$0")/.."
bin=${1:-build/rosetta}
doc=docs/cli.md
[[ -x $bin ]] || { echo "update-cli-docs: $bin not built" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
in_old=0
while IFS= read -r line; do
  if ((in_old)); then  # the block being replaced, up to its closing fence
    [[ $line == '```' ]] && in_old=0
    continue
  fi
  printf '%s\n' "$line" >>"$out"
  if [[ $line =~ ^'<!-- rosetta '([a-z-]*)' '?'--help -->'$ ]]; then
    cmd=${BASH_REMATCH[1]}
    IFS= read -r fence || fence=
    [[ $fence == '```'* ]] || { echo "update-cli-docs: no code block after '$line'" >&2; exit 1; }
    echo '```text' >>"$out"
    help_of "$cmd" "$bin" >>"$out"
    echo '```' >>"$out"
    in_old=1
  fi
done <"$doc"
cp "$out" "$doc"
echo "update-cli-docs: $doc's flag lists are $("$bin" --version </dev/null)'s"
