#!/usr/bin/env bash
# The link check: nothing in the documentation points at a file that is not there.
#
#   bash scripts/check-links.sh [ROOT]      # ROOT: the repository (default: this one)
#
# In the Markdown files (README.md, CHANGELOG.md, docs/**, examples/**, bench/**,
# tests/golden/README.md), outside fenced and indented code blocks:
# - every relative link [text](path) or [text](path#heading) must name a file or directory that
#   exists (relative to the Markdown file), and a #heading must be one of that file's headings
#   (as GitHub makes anchors of them: lower case, punctuation dropped, spaces as hyphens);
# - every repository path written in backquotes must exist: a word of a code span that contains
#   a '/' and starts with a top-level directory of the repository (`scripts/lint.sh`,
#   `tests/apps/test_cli.cpp:164`), or starts with ./ or ../ (relative to the Markdown file).
#   A header may be named by its include path (`rosetta/core/tensor.h` or `core/tensor.h`:
#   core/include/rosetta/core/tensor.h). Words with placeholders or patterns (<layer>, *, $,
#   {}) are not paths. What a run writes (runs/..., data/de-en, data/messages, build/...,
#   sweeps/...) is allowed by the list `generated` below.
# A fenced code block right after `<!-- excerpt: PATH -->` must be a quote of PATH's lines as they
# are. In the sources (*.h, *.cpp, *.sh, *.cmake, *.py, CMakeLists.txt, *.txt), every docs/...md
# reference (with its #heading, if any) must exist too: code comments link to the notebooks.
#
# Prints FILE:LINE: what is missing, for each one, and exits 1 if anything is; else one line.
# Bash, grep, sed and awk only (what a fresh Debian 12 has). Run by scripts/lint.sh and CTest.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root"
export LC_ALL=C

# Paths a run or a build makes, which a clone does not have.
generated='^(runs|sweeps|build[^/]*|data/de-en|data/messages)(/|$)'

mds=()
for f in README.md CHANGELOG.md tests/golden/README.md; do [[ -f $f ]] && mds+=("$f"); done
for d in docs examples bench; do
  [[ -d $d ]] && while IFS= read -r f; do mds+=("$f"); done < <(find "$d" -name '*.md' | sort)
done

top=" "
for d in */; do top+="${d%/} "; done

failures=0
fail() {  # FILE LINE MESSAGE
  echo "$1:$2: $3"
  failures=$((failures + 1))
}

# The anchors of a Markdown file's headings, one a line (GitHub's rule; a repeated heading's
# anchor gets -1, -2, ...), and those of explicit <a id="..."> / <a name="..."> tags.
anchors() {
  awk '
    /^[ \t]*(```|~~~)/ { fence = !fence; next }
    fence { next }
    /^#+[ \t]/ {
      s = $0
      sub(/^#+[ \t]+/, "", s); sub(/[ \t]+#*[ \t]*$/, "", s)
      s = tolower(s)
      gsub(/[^a-z0-9 _-]/, "", s)
      gsub(/ /, "-", s)
      if (s in seen) { seen[s]++; s = s "-" seen[s] } else seen[s] = 0
      print s
    }
    { line = $0
      while (match(line, /<a (id|name)="[^"]+"/)) {
        a = substr(line, RSTART, RLENGTH); sub(/^<a (id|name)="/, "", a); sub(/"$/, "", a)
        print a
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}

has_anchor() {  # FILE ANCHOR
  anchors "$1" | grep -qxF -- "$2"
}

# Where a backquoted repository path resolves: the repository root, the Markdown file's folder,
# or a header's include path. Prints nothing when nowhere.
resolve() {  # PATH DIR
  local p=$1 dir=$2
  if [[ -e $p ]]; then echo "$p"; return; fi
  if [[ -e $dir/$p ]]; then echo "$dir/$p"; return; fi
  if [[ $p =~ ^rosetta/([a-z]+)/(.+)$ && -e ${BASH_REMATCH[1]}/include/$p ]]; then
    echo "${BASH_REMATCH[1]}/include/$p"; return
  fi
  if [[ $p =~ ^([a-z]+)/([^/]+\.h)$ && -e ${BASH_REMATCH[1]}/include/rosetta/$p ]]; then
    echo "${BASH_REMATCH[1]}/include/rosetta/$p"; return
  fi
}

for md in "${mds[@]}"; do
  dir=$(dirname "$md")
  # LINE <tab> link|code <tab> TARGET for each link and each word of each code span.
  while IFS=$'\t' read -r line kind target; do
    if [[ $kind == link ]]; then
      [[ $target =~ ^[a-zA-Z][a-zA-Z0-9+.-]*: ]] && continue  # https:, mailto:, ...
      path=${target%%#*}
      anchor=
      [[ $target == *'#'* ]] && anchor=${target#*#}
      if [[ -z $path ]]; then
        [[ -n $anchor ]] && ! has_anchor "$md" "$anchor" && fail "$md" "$line" "no heading '#$anchor' here"
        continue
      fi
      if [[ ! -e $dir/$path ]]; then
        fail "$md" "$line" "dead link '$target': no $(realpath -m --relative-to=. "$dir/$path")"
      elif [[ -n $anchor && $path == *.md ]] && ! has_anchor "$dir/$path" "$anchor"; then
        fail "$md" "$line" "dead link '$target': no heading '#$anchor' in $(realpath -m --relative-to=. "$dir/$path")"
      fi
      continue
    fi
    # A word of a code span.
    w=$target
    [[ $w =~ [\<\>\*\$\{\}\|=~\'\"\`\\] || $w == *...* || $w == -* || $w == *://* ]] && continue
    w=${w#\(}
    while [[ $w =~ [],.\;:\)]$ ]]; do w=${w%?}; done
    [[ $w =~ ^(.*):[0-9]+(-[0-9]+)?$ ]] && w=${BASH_REMATCH[1]}
    w=${w#./}
    anchor=
    if [[ $w == *'#'* ]]; then anchor=${w#*#}; w=${w%%#*}; fi
    [[ $w == */* ]] || continue
    first=${w%%/*}
    if [[ $first == .. ]]; then
      w=$(realpath -m --relative-to=. "$dir/$w")
    elif [[ $top != *" $first "* && $first != rosetta ]]; then
      continue  # not a path in the repository (/dev/stdout, DIR/train.log, ...)
    fi
    [[ $w =~ $generated ]] && continue
    found=$(resolve "$w" "$dir")
    if [[ -z $found ]]; then
      fail "$md" "$line" "no such file or directory \`$target\`"
    elif [[ -n $anchor && $found == *.md ]] && ! has_anchor "$found" "$anchor"; then
      fail "$md" "$line" "no heading '#$anchor' in $found (\`$target\`)"
    fi
  done < <(awk '
    /^[ \t]*(```|~~~)/ { fence = !fence; blank = 0; next }
    fence { next }
    /^[ \t]*$/ { blank = 1; next }
    /^(    |\t)/ && (blank || code) { code = 1; next }
    { code = 0; blank = 0; s = $0
      rest = s
      while (match(rest, /\]\([^) \t]+([ \t]+"[^"]*")?\)/)) {
        t = substr(rest, RSTART + 2, RLENGTH - 3)
        sub(/[ \t].*$/, "", t); gsub(/^<|>$/, "", t)
        print NR "\tlink\t" t
        rest = substr(rest, RSTART + RLENGTH)
      }
      rest = s
      while (match(rest, /`[^`]+`/)) {
        t = substr(rest, RSTART + 1, RLENGTH - 2)
        n = split(t, words, /[ \t]+/)
        for (i = 1; i <= n; i++) if (words[i] != "") print NR "\tcode\t" words[i]
        rest = substr(rest, RSTART + RLENGTH)
      }
    }' "$md")
done

# Quoted code: a fenced block right after a line `<!-- excerpt: PATH -->` must be whole lines of
# PATH (from the repository root, or the Markdown file's folder) as they are, so that an example a
# page quotes is the example the tests build and run.
for md in "${mds[@]}"; do
  dir=$(dirname "$md")
  while IFS=: read -r line path; do
    src=$(resolve "$path" "$dir")
    if [[ -z $src || ! -f $src ]]; then
      fail "$md" "$line" "no such file $path (the excerpt's source)"
      continue
    fi
    block=$(awk -v start="$line" 'NR == start + 1 { if ($0 !~ /^```/) exit; next }
                                  NR > start + 1 { if ($0 ~ /^```/) exit; print }' "$md")
    content=$(<"$src")
    if [[ -z $block || $'\n'$content$'\n' != *$'\n'"$block"$'\n'* ]]; then
      fail "$md" "$line" "the code block below is not a quote of $path as it is"
    fi
  done < <(grep -n '^<!-- excerpt: [^ ]* -->$' "$md" | sed -E 's/^([0-9]+):<!-- excerpt: ([^ ]*) -->$/\1:\2/' || true)
done

# docs/...md references in the sources (code comments link to the notebooks).
src_dirs=()
for d in */; do
  d=${d%/}
  [[ $d == build* || $d == docs ]] && continue
  src_dirs+=("$d")
done
if ((${#src_dirs[@]})); then
  while IFS=: read -r file line ref; do
    [[ $file == tests/links/* ]] && continue  # the check's own fixtures
    path=${ref%%#*}
    anchor=
    [[ $ref == *'#'* ]] && anchor=${ref#*#}
    if [[ ! -f $path ]]; then
      fail "$file" "$line" "no such file $path"
    elif [[ -n $anchor ]] && ! has_anchor "$path" "$anchor"; then
      fail "$file" "$line" "no heading '#$anchor' in $path"
    fi
  done < <(grep -rnoE --include='*.h' --include='*.cpp' --include='*.sh' --include='*.cmake' \
             --include='*.py' --include='*.txt' --include='*.in' \
             '(^|[^A-Za-z0-9_./-])docs/[A-Za-z0-9_-][A-Za-z0-9_./-]*\.md(#[A-Za-z0-9_-]+)?' "${src_dirs[@]}" CMakeLists.txt 2>/dev/null |
           sed -E 's/^([^:]+:[0-9]+:)[^d]*/\1/' || true)
fi

if ((failures)); then
  echo "check-links: $failures dead reference(s) (above)" >&2
  exit 1
fi
echo "check-links: ${#mds[@]} Markdown files, every relative link and repository path exists"
