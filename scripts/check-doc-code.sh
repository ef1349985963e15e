#!/usr/bin/env bash
# The manual's code check: its C++ compiles against the build, and its `rosetta` commands name
# subcommands and flags the CLI has.
#
#   bash scripts/check-doc-code.sh [--cxx CXX] [--flags "FLAGS"] [--include DIR:DIR...]
#                                  [--define DEF:DEF...] [--rosetta BIN] [ROOT]
#
# CTest passes the compiler, the C++ standard, the include directories and definitions of
# rosetta::rosetta, and the built CLI (tests/CMakeLists.txt). Alone, the defaults: c++,
# -std=c++20, ROOT's include directories and ROOT/build's, and ROOT/build/rosetta if built.
# The pages: README.md, docs/*.md (not docs/results/, the notebooks) and examples/*/README.md.
#
# C++: each ```cpp block is compiled (-fsyntax-only) as the line just above its fence says:
#   (no marker)                               a whole translation unit, compiled as it is
#   <!-- doc-code: declarations -->           code at namespace scope (classes, functions)
#   <!-- doc-code: fragment -->               statements: the body of a function
#   <!-- doc-code: fragment(Generator& gen) -->  ... whose parameters are the names it uses
#   <!-- doc-code: declarations, given: struct Block : nn::Module { Block(int64_t d); }; -->
#   <!-- doc-code: fragment(...), given: ... -->  ... after the declarations given (of names
#                                             the page does not show: the reader's own)
#   <!-- doc-code: not compiled: REASON -->   not compiled, for the reason given
#   <!-- excerpt: PATH -->                    a quote of PATH, which the build compiles
#                                             (check-links.sh holds the quote to PATH)
# Declarations and fragments get the #include lines they hold (else <rosetta/rosetta.h>), the
# standard headers of std_headers below and `using namespace rosetta;`. In every block a line
# that is `...` alone (a comment may follow) stands for elided code. #line directives make the
# compiler name the page's own lines (the marker's line for what it gives).
#
# Commands: in the other code blocks (fenced, or indented by 4 spaces), a command is a line whose
# first word is rosetta (or build/rosetta, any path ending in /rosetta, `$ rosetta`, or
# `mpirun ... rosetta`), after VAR=value words; a trailing \ continues it on the next line, a
# word starting with # begins a comment, | ; && || end it (what follows is checked as a command
# of its own) and redirections (< in, > out, 2>&1) are dropped. Its subcommand must be one that
# `rosetta --help` lists, and each -flag one of the option lines of `rosetta SUB --help` (a
# --flag=value by its name). Words holding `...` are placeholders. Words after `--` are the
# flags of the subcommand SUB2 whose help says "after --: rosetta SUB2 flags" (sweep: train).
# Without a built CLI (no --rosetta; run with no options, no ROOT/build/rosetta) the commands
# are not checked.
#
# Prints FILE:LINE: what fails (for C++, LINE is the block's opening fence, then the compiler's
# first error), for each finding, and exits 1 if any; else one line. Bash, awk, sed, a compiler.
set -euo pipefail
cxx=c++ flags=-std=c++20 includes='' defines='' rosetta='' alone=$(($# < 2))
while (($#)); do
  case $1 in
    --cxx) cxx=$2; shift 2 ;;
    --flags) flags=$2; shift 2 ;;
    --include) includes=$2; shift 2 ;;
    --define) defines=$2; shift 2 ;;
    --rosetta) rosetta=$2; shift 2 ;;
    -*) echo "check-doc-code: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[[ -z $rosetta || $rosetta == /* ]] || rosetta=$PWD/$rosetta
includes=$(tr : '\n' <<<"$includes" | sed "/^\//!s|^.|$PWD/&|" | paste -sd:)
cd "$root"
export LC_ALL=C
if [[ -z $includes ]]; then
  for d in include */include build/include; do
    [[ -d $d/rosetta ]] && includes+=${includes:+:}$root/$d
  done
fi
((alone)) && [[ -x build/rosetta ]] && rosetta=$root/build/rosetta
compile=("$cxx")
read -ra words <<<"$flags"
compile+=("${words[@]}" -fsyntax-only)
IFS=: read -ra dirs <<<"$includes"
for d in "${dirs[@]}"; do [[ -n $d ]] && compile+=("-I$d"); done
IFS=: read -ra defs <<<"$defines"
for d in "${defs[@]}"; do [[ -n $d ]] && compile+=("-D$d"); done

pages=()
[[ -f README.md ]] && pages+=(README.md)
for f in docs/*.md examples/*/README.md; do [[ -f $f ]] && pages+=("$f"); done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {  # FILE LINE MESSAGE
  echo "$1:$2: $3"
  failures=$((failures + 1))
}

# One pass over a page. Each C++ block's lines go to a file of their own, and a line
#   cpp US FENCE_LINE US MARKER US FILE
# says where (US: the unit separator \037, so that an empty field survives `read`; MARKER: the
# comment above the fence, if it is a marker). A marker with no C++ block below it gives
# `orphan US LINE US MARKER`. Each word a command's check needs gives
#   sub US LINE US WORD            the subcommand
#   flag US LINE US SUB US WORD    a flag (SUB: empty for rosetta's own, SUB-- after --)
# shellcheck disable=SC2016
extract='
function reset_cmd() { nw = 0; cont = 0; skip = 0 }
# The shell words of one line of a command, appended to W[] (their line numbers to WL[]);
# | ; & && || become the word "\001;". A redirection drops itself and its target.
function tokenize(s, ln,    i, c, q, w, have, op) {
  q = ""; w = ""; have = 0
  for (i = 1; i <= length(s) + 1; i++) {
    c = (i <= length(s)) ? substr(s, i, 1) : " "
    if (q != "") { if (c == q) q = ""; else w = w c; continue }
    if (c == "\"" || c == "\047") { q = c; have = 1; continue }
    if (c ~ /[ \t|;&<>]/) {
      if (have) {
        if (c ~ /[<>]/ && w ~ /^[0-9]+$/) ;  # the 2 of 2>
        else if (skip) skip = 0               # the file of a redirection
        else { W[++nw] = w; WL[nw] = ln }
        have = 0; w = ""
      }
      if (c ~ /[ \t]/) continue
      op = c
      while (substr(s, i + 1, 1) ~ /[|;&<>]/) op = op substr(s, ++i, 1)
      if (op !~ /[<>]/) { W[++nw] = "\001;"; WL[nw] = ln }
      else if (op ~ /&$/ && substr(s, i + 1, 1) ~ /[0-9]/) i++  # 2>&1: no file
      else skip = 1
      continue
    }
    if (c == "#" && !have) break
    w = w c; have = 1
  }
}
# A whole command: each segment that runs rosetta (first, or after mpirun/mpiexec and its
# options) gives its subcommand and flags.
function check_cmd(    i, j, k, first, prog, ctx, top, w) {
  W[++nw] = "\001;"
  for (i = 1; i <= nw; i = j + 1) {
    for (j = i; j <= nw && W[j] != "\001;"; j++) ;
    first = i
    while (first < j && (W[first] == "$" || W[first] ~ /^[A-Za-z_][A-Za-z0-9_]*=/)) first++
    prog = 0
    if (first < j && W[first] ~ /(^|\/)rosetta$/) prog = first
    else if (first < j && W[first] ~ /(^|\/)(mpirun|mpiexec)$/)
      for (k = first + 1; k < j && !prog; k++) if (W[k] ~ /(^|\/)rosetta$/) prog = k
    if (!prog) continue
    ctx = ""; top = 1
    for (k = prog + 1; k < j; k++) {
      w = W[k]
      if (w ~ /\.\.\.|\342\200\246/) continue  # a placeholder
      if (top && w !~ /^-/) { print "sub\037" WL[k] "\037" w; ctx = w; top = 0 }
      else if (!top && w == "--") { if (ctx !~ /--$/) ctx = ctx "--" }
      else if (w ~ /^--?[A-Za-z]/) { sub(/=.*/, "", w); print "flag\037" WL[k] "\037" ctx "\037" w }
    }
  }
  reset_cmd()
}
function code_line(s, ln) {
  if (s !~ /\\[ \t]*$/) { tokenize(s, ln); check_cmd(); return }
  sub(/\\[ \t]*$/, "", s); tokenize(s, ln); cont = 1
}
BEGIN { reset_cmd() }
{ line = $0 }
fence {
  if (line ~ "^[ \t]*" fence "[" substr(fence, 1, 1) "]*[ \t]*$") {
    fence = ""; if (cpp) close(file); if (cont) check_cmd()
  } else if (cpp) print line > file
  else code_line(line, NR)
  prev = line; next
}
match(line, /^[ \t]*(```+|~~~+)/) {
  fence = substr(line, RSTART, RLENGTH); sub(/^[ \t]*/, "", fence)
  info = tolower(substr(line, RSTART + RLENGTH))
  sub(/^[ \t]*/, "", info); sub(/[ \t{].*$/, "", info)
  cpp = (info ~ /^(cpp|c\+\+|cxx|cc)$/)
  if (cont) check_cmd()
  if (cpp) {
    file = tmp "/block" ++nblocks
    printf "" > file
    marker = (prev ~ /^[ \t]*<!-- (doc-code|excerpt):.*-->[ \t]*$/) ? prev : ""
    sub(/^[ \t]+/, "", marker); sub(/[ \t]+$/, "", marker)
    print "cpp\037" NR "\037" marker "\037" file
  } else if (pending) print "orphan\037" NR - 1 "\037" prev
  pending = 0; blank = 0; code = 0; prev = line; next
}
{
  if (pending) print "orphan\037" NR - 1 "\037" prev
  pending = (line ~ /^[ \t]*<!-- doc-code:/)
  prev = line
}
/^[ \t]*$/ { blank = 1; if (cont) check_cmd(); next }
/^(    |\t)/ && (blank || code) { code = 1; code_line(line, NR); next }
{ code = 0; blank = 0; if (cont) check_cmd() }
END { if (pending) print "orphan\037" NR "\037" prev; if (cont) check_cmd() }
'

# ---------------------------------------------------------------- C++
# The preamble of declarations and fragments: the standard headers the pages take for granted.
std_headers='#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>'
include_re='^[[:space:]]*#[[:space:]]*include'
elided_re='^[[:space:]]*\.\.\.[[:space:]]*(//.*)?$'

# Compiles one block; prints nothing, or the compiler's first error (where: a line of the page).
compile_block() {  # PAGE FENCE_LINE KIND PARAMS GIVEN BODY_FILE
  local page=$1 fence=$2 kind=$3 params=$4 given=$5 body=$6 tu=$tmp/tu.cpp out first
  {
    if [[ $kind != unit ]]; then
      echo "$std_headers"
      if grep -qE "$include_re" "$body"; then  # its own, each at its line of the page
        grep -nE "$include_re" "$body" | while IFS=: read -r n text; do
          printf '#line %d "%s"\n%s\n' "$((fence + n))" "$page" "$text"
        done
      else
        echo '#include <rosetta/rosetta.h>'
      fi
      echo 'using namespace rosetta;'
      printf '#line %d "%s"\n%s\n' "$((fence - 1))" "$page" "$given"
      if [[ $kind == fragment ]]; then
        echo "[[maybe_unused]] static auto doc_code_fragment($params) {"
      fi
    fi
    echo "#line $((fence + 1)) \"$page\""
    # Elided lines and, but in whole units, the #include lines moved above: blank.
    if [[ $kind == unit ]]; then
      sed -E "s|$elided_re||" "$body"
    else
      sed -E -e "s|$elided_re||" -e "s|$include_re.*\$||" "$body"
    fi
    if [[ $kind == fragment ]]; then echo '}'; fi
  } >"$tu"
  if out=$("${compile[@]}" -x c++ "$tu" 2>&1); then return; fi
  first=$(grep -m1 -E '(fatal )?error: ' <<<"$out" || true)
  [[ -z $first ]] && first=$(head -n1 <<<"$out")
  first=${first#"$root/"}
  [[ $first == "$tu:"* ]] && first="in what it is given: ${first#*error: }"
  if [[ $first =~ ^"$page":([0-9]+):[0-9]+:\ (fatal\ )?error:\ (.*)$ ]]; then
    first="line ${BASH_REMATCH[1]}: ${BASH_REMATCH[3]}"
  fi
  echo "$first"
}

blocks=0 compiled=0
check_cpp() {  # PAGE FENCE_LINE MARKER BODY_FILE
  local page=$1 fence=$2 marker=$3 body=$4 spec kind='' what params='' given='' err
  blocks=$((blocks + 1))
  case $marker in
    '') kind=unit ;;
    '<!-- excerpt: '*) return ;;
    '<!-- doc-code: not compiled: '?*' -->') return ;;
    '<!-- doc-code: '*' -->')
      spec=${marker#'<!-- doc-code: '}
      spec=${spec%' -->'}
      if [[ $spec == *', given: '* ]]; then
        given=${spec#*', given: '}
        spec=${spec%%', given: '*}
      fi
      case $spec in
        declarations | fragment) kind=$spec ;;
        'fragment('*')') kind=fragment params=${spec#'fragment('} params=${params%')'} ;;
      esac ;;
  esac
  if [[ -z $kind ]]; then
    spec="declarations, fragment, fragment(PARAMS), each maybe with ', given: DECLARATIONS'"
    fail "$page" "$((fence - 1))" "unknown marker '$marker' ($spec; or not compiled: REASON)"
    return 0
  fi
  compiled=$((compiled + 1))
  case $kind in
    unit) what='a whole translation unit' ;;
    fragment) what='a fragment' ;;
    *) what=$kind ;;
  esac
  err=$(compile_block "$page" "$fence" "$kind" "$params" "$given" "$body")
  [[ -n $err ]] && fail "$page" "$fence" "the C++ block ($what) does not compile: $err"
  return 0
}

# ---------------------------------------------------------------- commands
declare -A options=() after_dashes=() known=()
subcommands=''
# Reads `rosetta [SUB] --help` once: its flags into options[xSUB] (" -h --help ... "), the
# subcommand its help hands the words after -- to into after_dashes[xSUB], and for rosetta's
# own help, its subcommands into known[].
load_help() {  # SUB (empty: rosetta itself)
  local sub=$1 text s
  [[ -n ${options[x$sub]+set} ]] && return
  # shellcheck disable=SC2086
  text=$("$rosetta" $sub --help </dev/null 2>/dev/null || true)
  options[x$sub]=" $(awk '/^[ \t]+-/ { n = split($1, f, ",")
      for (i = 1; i <= n; i++) { sub(/[{=[].*$/, "", f[i]); if (f[i] ~ /^-/) printf "%s ", f[i] } }
    ' <<<"$text")"
  if [[ $text =~ after\ --:\ rosetta\ ([a-z-]+)\ flags ]]; then
    after_dashes[x$sub]=${BASH_REMATCH[1]}
  fi
  [[ -z $sub ]] || return 0
  while read -r s; do
    known[$s]=1
    subcommands+=${subcommands:+, }$s
  done < <(awk '/^Subcommands:/ { on = 1; next } on && /^[ \t]+[a-z]/ { print $1 }' <<<"$text")
  if [[ -z $subcommands ]]; then
    echo "check-doc-code: '$rosetta --help' lists no subcommands" >&2
    exit 1
  fi
}

commands=0
check_word() {  # PAGE KIND LINE CTX [WORD]
  local page=$1 kind=$2 line=$3 ctx=$4 word=${5-} sub via=''
  load_help ""
  if [[ $kind == sub ]]; then
    commands=$((commands + 1))
    [[ -n ${known[$ctx]+set} ]] ||
      fail "$page" "$line" "rosetta has no subcommand '$ctx' (rosetta --help lists: $subcommands)"
    return 0
  fi
  sub=$ctx
  if [[ $sub == *-- ]]; then
    sub=${sub%--}
    [[ -n ${known[$sub]+set} ]] || return 0
    load_help "$sub"
    [[ -n ${after_dashes[x$sub]+set} ]] || return 0  # its positionals, not flags
    via="rosetta $sub passes what follows -- to rosetta ${after_dashes[x$sub]}: "
    sub=${after_dashes[x$sub]}
  fi
  [[ -z $sub || -n ${known[$sub]+set} ]] || return 0  # reported as a subcommand
  load_help "$sub"
  if [[ ${options[x$sub]} != *" $word "* ]]; then
    fail "$page" "$line" \
      "${via}rosetta${sub:+ $sub} has no option $word (not in rosetta${sub:+ $sub} --help)"
  fi
  return 0
}

for page in "${pages[@]}"; do
  while IFS=$'\x1f' read -r kind line a b; do
    case $kind in
      cpp) check_cpp "$page" "$line" "$a" "$b" ;;
      orphan) fail "$page" "$line" "marker '$a' is not on the line just above a \`\`\`cpp block" ;;
      sub | flag) if [[ -n $rosetta ]]; then check_word "$page" "$kind" "$line" "$a" "$b"; fi ;;
    esac
  done < <(awk -v tmp="$tmp" "$extract" "$page")
done

# The flag lists the manual copies: the fenced block after a line `<!-- rosetta SUB --help -->`
# is what `rosetta SUB --help` prints now (scripts/update-cli-docs.sh writes them).
help_blocks=0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n $rosetta ]]; then
  for page in "${pages[@]}"; do
    while IFS=$'\x1f' read -r line sub; do
      help_blocks=$((help_blocks + 1))
      block=$(awk -v from="$line" 'NR == from + 1 && !/^```/ { exit } NR > from + 1 { if (/^```$/) exit; print }' "$page")
      [[ $block == "$(bash "$here/update-cli-docs.sh" --help-of "$sub" "$rosetta" 2>/dev/null)" ]] ||
        fail "$page" "$line" "the block below is not what rosetta${sub:+ $sub} --help prints now (scripts/update-cli-docs.sh rewrites it)"
    done < <(awk '/^<!-- rosetta ([a-z-]+ )?--help -->$/ { sub_ = ($3 == "--help") ? "" : $3; printf "%d\x1f%s\n", NR, sub_ }' "$page")
  done
fi

if ((failures)); then
  echo "check-doc-code: $failures finding(s) (above)" >&2
  exit 1
fi
checked="the rosetta commands not checked (no CLI built)"
[[ -z $rosetta ]] || checked="$commands rosetta commands name subcommands and flags the CLI has, $help_blocks flag lists are its --help"
echo "check-doc-code: ${#pages[@]} pages: $compiled of $blocks C++ blocks compile" \
  "(the rest are marked or quoted); $checked"
