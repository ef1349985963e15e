#!/usr/bin/env bash
# rosetta across thread counts on one machine, as the many-core tables of docs/results/speed.md were measured (a
# 16-core Xeon lent for minutes): the presets in fp32 and bf16 and PyTorch fp32 / bf16 autocast
# at each thread count, then the default translator job's training tokens/s in fp32 and bf16 at
# each thread count, and what --precision auto chooses there. One round of each (such machines
# are lent for minutes); the ratios within one run are what to read. Needs data/de-en for the
# translator job (skipped without it) and a Python with PyTorch 2.x for the PyTorch columns
# (skipped without it).
#
#   bench/cores.sh [--threads "2 16"] [--python PY] [--presets "small base"] [--updates 60]
#
# For a machine without the build tools: build here with -DROSETTA_NATIVE=OFF
# -DCMAKE_CXX_FLAGS=-march=x86-64-v4 -DBUILD_SHARED_LIBS=OFF -DROSETTA_MPI=OFF, copy build/rosetta
# and the Debian libraries `ldd` names into one folder, and set ROSETTA_BIN and LD_LIBRARY_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads="2 $(nproc)"; py=python3; presets="small base"; updates=60
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --updates) updates=$2; shift 2 ;;
    *) echo "usage: $0 [--threads LIST] [--python PY] [--presets LIST] [--updates N]" >&2; exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
torch_ref=${TORCH_REFERENCE:-$root/bench/torch_reference.py}
[ -x "$rosetta" ] || { echo "cores: $rosetta not built" >&2; exit 1; }
have_torch=0
[ -f "$torch_ref" ] && "$py" -c "import torch" 2>/dev/null && have_torch=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

field() {  # JSON line on stdin, key: the value, rounded
  "$py" -c 'import json,sys; r=json.loads(sys.stdin.read() or "{}"); v=r.get(sys.argv[1]); print("-" if v is None else (f"{v:,.0f}" if isinstance(v, (int, float)) and v > 10 else v))' "$1"
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) CPUs"
echo
echo "| job | threads | rosetta fp32 | MFU | rosetta bf16 | MFU | PyTorch fp32 | PyTorch bf16 autocast |"
echo "|---|---|---|---|---|---|---|---|"
for p in $presets; do
  s=10; [ "$p" = base ] && s=4
  for t in $threads; do
    fp32=$("$rosetta" bench --preset "$p" --threads "$t" --steps "$s" --precision fp32 2>/dev/null | tail -1 || true)
    bf16=$("$rosetta" bench --preset "$p" --threads "$t" --steps "$s" --precision bf16 2>"$out/bf16.err" | tail -1 || true)
    echo "$bf16" > "$out/bf16-$p-$t.json"
    tf=-; tb=-
    if [ $have_torch = 1 ]; then
      tf=$("$py" "$root/bench/torch_autocast.py" --reference "$torch_ref" --preset "$p" --threads "$t" --steps "$s" \
        --precision fp32 2>/dev/null | tail -1 | field tgt_tokens_per_s)
      tb=$("$py" "$root/bench/torch_autocast.py" --reference "$torch_ref" --preset "$p" --threads "$t" --steps "$s" \
        --precision bf16 2>/dev/null | tail -1 | field tgt_tokens_per_s)
    fi
    bf=$(echo "$bf16" | field tgt_tokens_per_s); bm=$(echo "$bf16" | field mfu)
    [ "$(echo "$bf16" | field precision)" = bf16 ] || { bf=-; bm=-; }
    echo "| preset $p | $t | $(echo "$fp32" | field tgt_tokens_per_s) | $(echo "$fp32" | field mfu) | $bf | $bm | $tf | $tb |"
  done
done
data=$root/data/de-en
if [ -f "$data/train.tsv" ]; then
  for t in $threads; do
    row="| default translator job, $updates updates | $t"
    for prec in fp32 bf16; do
      "$rosetta" train --train "$data/train.tsv" --valid "$data/valid.tsv" --out "$out/run-$t-$prec" --max-steps "$updates" \
        --validate-every 0 --save-every 0 --log-every 10 --valid-bleu-sentences 0 --threads "$t" --precision "$prec" \
        > "$out/train-$t-$prec.log" 2>&1 || { row="$row | failed |"; continue; }
      tps=$("$py" - "$out/run-$t-$prec/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
print(f"{statistics.median(r['tokens_per_s'] for r in rows[1:]):,.0f}")
PY
)
      row="$row | $tps |"
    done
    echo "$row | | |"
  done
fi
echo
b=$(echo $presets | cut -d' ' -f1); t=$(echo $threads | cut -d' ' -f1)
echo "$(tail -1 "$out/bf16-$b-$t.json" | field kernels)"
echo "--precision auto here: $("$rosetta" bench --preset tiny --threads 1 --steps 1 --warmup 0 2>/dev/null | tail -1 | field precision)"
grep -h "multiply-add rate\|no bf16" "$out/bf16.err" | sed 's/^\[[^]]*\] //' | head -1 || true
