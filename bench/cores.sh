#!/usr/bin/env bash
# rosetta across thread counts on one machine, as README's many-core table was measured (a
# 16-core Xeon lent for minutes): the presets out of the box (--precision auto), forced bf16 and
# PyTorch fp32 / bf16 autocast at each thread count, then the default translator job's training
# tokens/s at each thread count. One round of each (such machines are lent for minutes); the
# ratios within one run are what to read. Needs data/de-en for the translator job (skipped
# without it) and a Python with PyTorch 2.x for the PyTorch columns (skipped without it).
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
torch_ref=${TORCH_REFERENCE:-$root/../shared/bench/torch_reference.py}
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
echo "| job | threads | rosetta auto | MFU | rosetta bf16 | PyTorch fp32 | PyTorch bf16 autocast |"
echo "|---|---|---|---|---|---|---|"
for p in $presets; do
  s=10; [ "$p" = base ] && s=4
  for t in $threads; do
    auto=$("$rosetta" bench --preset "$p" --threads "$t" --steps "$s" 2>"$out/auto.err" | tail -1)
    echo "$auto" > "$out/auto-$p-$t.json"
    bf16=$("$rosetta" bench --preset "$p" --threads "$t" --steps "$s" --precision bf16 2>/dev/null | tail -1 || true)
    tf=-; tb=-
    if [ $have_torch = 1 ]; then
      tf=$("$py" "$root/bench/torch_autocast.py" --reference "$torch_ref" --preset "$p" --threads "$t" --steps "$s" \
        --precision fp32 2>/dev/null | tail -1 | field tgt_tokens_per_s)
      tb=$("$py" "$root/bench/torch_autocast.py" --reference "$torch_ref" --preset "$p" --threads "$t" --steps "$s" \
        --precision bf16 2>/dev/null | tail -1 | field tgt_tokens_per_s)
    fi
    bf=$(echo "$bf16" | field tgt_tokens_per_s); [ "$(echo "$bf16" | field precision)" = bf16 ] || bf=-
    echo "| preset $p | $t | $(echo "$auto" | field tgt_tokens_per_s) ($(echo "$auto" | field precision)) | $(echo "$auto" | field mfu) | $bf | $tf | $tb |"
  done
done
data=$root/data/de-en
if [ -f "$data/train.tsv" ]; then
  for t in $threads; do
    "$rosetta" train --train "$data/train.tsv" --valid "$data/valid.tsv" --out "$out/run-$t" --max-steps "$updates" \
      --validate-every 0 --save-every 0 --log-every 20 --valid-bleu-sentences 0 --threads "$t" > "$out/train-$t.log" 2>&1
    tps=$("$py" - "$out/run-$t/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
print(f"{statistics.median(r['tokens_per_s'] for r in rows[1:]):,.0f}")
PY
)
    echo "| default translator job, $updates updates | $t | $tps | | | | |"
  done
fi
echo
echo "$(tail -1 "$out/auto-$(echo $presets | cut -d' ' -f1)-$(echo $threads | cut -d' ' -f1).json" | field kernels)"
grep -h "multiply-add rate\|no bf16" "$out/auto.err" | sed 's/^\[[^]]*\] //' | head -1 || true
