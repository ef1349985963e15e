#!/usr/bin/env bash
# Decoding against CTranslate2 on one trained translator: exports RUN_DIR (rosetta export), then
# translates a file of source lines with `rosetta translate` (each --precision given) and
# CTranslate2 (float32 and int8; ctranslate2-TYPE-N: N batches side by side, each on threads / N
# threads), alternating rounds, and prints each one's median seconds, sentences/s and how many
# lines agree with rosetta's first precision.
#
#   bench/ctranslate2.sh RUN_DIR SOURCE_LINES [--rounds 3] [--threads 2] [--beam 4] [--precisions "fp32"]
#
# rosetta's time is the whole process (start-up, model load, tokenizer); CTranslate2's is
# measured inside Python from loading the tokenizer to the last line (its interpreter start and
# import are left out: in its favour). Needs VENV (default ../venv) with PyPI's ctranslate2 and
# sentencepiece: python3 -m venv ../venv && ../venv/bin/pip install ctranslate2 sentencepiece.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 RUN_DIR SOURCE_LINES [--rounds N] [--threads N] [--beam N] [--precisions LIST]" >&2; exit 2; }
run=$1; src=$2; shift 2
rounds=3; threads=2; beam=4; precisions=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --beam) beam=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
py=${VENV:-$root/../venv}/bin/python
[ -x "$rosetta" ] || { echo "ctranslate2.sh: $rosetta not built" >&2; exit 1; }
"$py" -c "import ctranslate2, sentencepiece" 2>/dev/null || { echo "ctranslate2.sh: $py lacks ctranslate2/sentencepiece (see the header)" >&2; exit 1; }
out=$(mktemp -d)
for q in float32 int8; do "$rosetta" export --quantization "$q" "$run" "$out/ct2-$q"; done
n=$(grep -c '' "$src")
# CTranslate2 one batch at a time on all threads (intra_threads), and, with 2 threads or more,
# also one batch per thread side by side (inter_threads), as rosetta decodes.
at_once=1; [ "$threads" -ge 2 ] && at_once="1 $threads"
for r in $(seq "$rounds"); do
  for p in $precisions; do
    s=$(date +%s.%N)
    "$rosetta" translate --model "$run" --beam "$beam" --threads "$threads" --precision "$p" < "$src" > "$out/rosetta-$p.txt" 2>/dev/null
    e=$(date +%s.%N)
    echo "rosetta-$p $(echo "$e - $s" | bc)" >> "$out/times"
  done
  for q in float32 int8; do
    for at in $at_once; do
      k=ctranslate2-$q-$at
      "$py" "$root/bench/ct2.py" translate "$out/ct2-$q" "$run/src.model" --beam "$beam" --threads "$threads" \
        --batches-at-once "$at" < "$src" > "$out/$k.txt" 2> "$out/err"
      echo "$k $(awk '/^seconds/ {print $2}' "$out/err")" >> "$out/times"
    done
  done
done
first=rosetta-${precisions%% *}
printf '%-24s %9s %12s %22s\n' "decoder" "median s" "sentences/s" "lines as $first"
{ for k in $precisions; do echo "rosetta-$k"; done
  for q in float32 int8; do for at in $at_once; do echo "ctranslate2-$q-$at"; done; done; } | while read -r k; do
  med=$(awk -v k="$k" '$1 == k {print $2}' "$out/times" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  same=$(paste -d'\n' "$out/$first.txt" "$out/$k.txt" | paste - - | awk -F'\t' '$1 == $2' | wc -l)
  printf '%-24s %9.2f %12.0f %16s of %s\n' "$k" "$med" "$(echo "$n / $med" | bc -l)" "$same" "$n"
done
echo "(beam $beam, $threads threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); outputs in $out)"
