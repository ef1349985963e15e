#!/usr/bin/env bash
# Runs rosetta's benchmark and the PyTorch reference (bench/torch_reference.py, with
# Debian's python3-torch) back to back on this machine, preset by preset, and prints a table
# of training tokens/s, decoding sentences/s, MFU and peak RSS with the ratios. Both in fp32
# (rosetta bench --precision fp32); bench/precision.sh compares bf16 with PyTorch's autocast.
#
#   bench/compare.sh [--presets "tiny small base"] [--threads 2] [--steps 20] [--rounds 3]
#
# Each measurement is the median over `--rounds` alternating runs (ours, torch, ours, ...), so a
# drift in machine speed hits both sides. Both run with the same environment, including
# OPENBLAS_CORETYPE (reported in the table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
presets="tiny small base"; threads=2; steps=20; rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--presets LIST] [--threads N] [--steps N] [--rounds N]" >&2; exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
torch_ref=${TORCH_REFERENCE:-$root/bench/torch_reference.py}
[ -x "$rosetta" ] || { echo "compare: $rosetta not built" >&2; exit 1; }
[ -f "$torch_ref" ] || { echo "compare: $torch_ref not found (set TORCH_REFERENCE)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "compare: needs python3-torch (apt-get install python3-torch)" >&2; exit 1; }

out=$(mktemp -d)
for p in $presets; do
  # base steps take seconds: fewer of them
  s=$steps; [ "$p" = base ] && s=$(( steps < 6 ? steps : 6 ))
  for r in $(seq "$rounds"); do
    "$rosetta" bench --preset "$p" --threads "$threads" --steps "$s" --precision fp32 >> "$out/ours.$p.train"
    /usr/bin/python3 "$torch_ref" --preset "$p" --threads "$threads" --steps "$s" >> "$out/torch.$p.train"
    if [ "$p" != base ]; then
      "$rosetta" bench --decode --preset "$p" --threads "$threads" --steps "$s" --precision fp32 >> "$out/ours.$p.decode"
      /usr/bin/python3 "$torch_ref" --decode --preset "$p" --threads "$threads" --steps "$s" >> "$out/torch.$p.decode"
    fi
  done
done

/usr/bin/python3 - "$out" "$presets" <<'PY'
import json, os, statistics, sys
out, presets = sys.argv[1], sys.argv[2].split()
def load(name):
    path = os.path.join(out, name)
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []
def med(rows, key, mode=None):
    vals = [r[key] for r in rows if mode is None or r.get("mode") == mode]
    return statistics.median(vals) if vals else float("nan")
core = os.environ.get("OPENBLAS_CORETYPE", "auto")
print(f"OPENBLAS_CORETYPE={core}")
print("| preset | ours tok/s | PyTorch tok/s | ratio | MFU | ours RSS MB | PyTorch RSS MB | RSS ratio |")
print("|---|---|---|---|---|---|---|---|")
for p in presets:
    o, t = load(f"ours.{p}.train"), load(f"torch.{p}.train")
    a, b = med(o, "tgt_tokens_per_s"), med(t, "tgt_tokens_per_s")
    ra, rb = med(o, "peak_rss_mb"), med(t, "peak_rss_mb")
    print(f"| {p} | {a:,.0f} | {b:,.0f} | {a/b:.2f}x | {med(o,'mfu'):.2f} | {ra:,.0f} | {rb:,.0f} | {ra/rb:.2f} |")
print()
print("| preset | mode | ours sent/s | PyTorch sent/s | ratio |")
print("|---|---|---|---|---|")
for p in presets:
    o, t = load(f"ours.{p}.decode"), load(f"torch.{p}.decode")
    if not o: continue
    b = med(t, "sentences_per_s", "greedy-decode")
    for mode in ("greedy-decode", "beam4-decode"):
        a = med(o, "sentences_per_s", mode)
        print(f"| {p} | {mode} | {a:,.1f} | {b:,.1f} (greedy) | {a/b:.2f}x |")
PY
rm -rf "$out"
