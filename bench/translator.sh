#!/usr/bin/env bash
# The default translator, fp32 against bf16 on this machine, in alternating rounds:
#   training: `rosetta train` with the default recipe for 160 updates (validation off), the
#     median tokens/s of the log intervals after the first (warm-up) one, then the median of
#     the rounds;
#   decoding: `rosetta translate --beam 4` of the test set's sources with MODEL, whole process
#     (loading included), and the BLEU of each precision's translations (`rosetta score`).
#
#   bench/translator.sh [--model RUN_DIR] [--rounds 3] [--threads 2]
#
# Needs data/de-en (scripts/prepare-corpus.sh data/de-en); without --model it skips decoding.
# Run it alone on the machine: it measures time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=""; rounds=3; threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--model RUN_DIR] [--rounds N] [--threads N]" >&2; exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
data=$root/data/de-en
[ -x "$rosetta" ] || { echo "translator: $rosetta not built" >&2; exit 1; }
[ -f "$data/train.tsv" ] || { echo "translator: no $data (scripts/prepare-corpus.sh data/de-en)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for r in $(seq "$rounds"); do
  for p in fp32 bf16; do
    "$rosetta" train --train "$data/train.tsv" --valid "$data/valid.tsv" --out "$out/run-$p-$r" --max-steps 160 \
      --validate-every 0 --save-every 0 --log-every 40 --valid-bleu-sentences 0 --precision "$p" \
      --threads "$threads" > "$out/train-$p-$r.log" 2>&1
    python3 - "$out/run-$p-$r/metrics.jsonl" >> "$out/train-$p" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
print(statistics.median(r["tokens_per_s"] for r in rows[1:]))
PY
    if [ -n "$model" ]; then
      cut -f1 "$data/test.tsv" > "$out/test.de"
      start=$(date +%s.%N)
      "$rosetta" translate --model "$model" --beam 4 --precision "$p" --threads "$threads" --input "$out/test.de" \
        --output "$out/hyp-$p.txt" 2>/dev/null
      end=$(date +%s.%N)
      python3 -c "print($end - $start)" >> "$out/decode-$p"
    fi
  done
done

grep -h "kernels:" "$out/train-bf16-1.log" | sed 's/^\[[^]]*\] //'
python3 - "$out" "$rounds" <<'PY'
import os, statistics, sys
out = sys.argv[1]
def med(name):
    return statistics.median(float(l) for l in open(os.path.join(out, name)))
f, b = med("train-fp32"), med("train-bf16")
print(f"training tokens/s (median of {sys.argv[2]} rounds): fp32 {f:,.0f}, bf16 {b:,.0f}: {b / f:.2f}x")
if os.path.exists(os.path.join(out, "decode-fp32")):
    f, b = med("decode-fp32"), med("decode-bf16")
    print(f"translate --beam 4, test set, whole process: fp32 {f:.2f} s, bf16 {b:.2f} s: {f / b:.2f}x")
PY
if [ -n "$model" ]; then
  cut -f2 "$data/test.tsv" > "$out/test.en"
  for p in fp32 bf16; do
    echo "BLEU $p: $("$rosetta" score --hyp "$out/hyp-$p.txt" --ref "$out/test.en" | head -1)"
  done
fi
