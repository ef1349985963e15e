#!/usr/bin/env bash
# fp32 against bf16, rosetta against PyTorch with bf16 autocast, in one run on this machine:
# training tokens/s of the presets of torch_reference.py, medians of alternating rounds (rosetta
# fp32, rosetta bf16, PyTorch fp32, PyTorch bf16, then again), with the ratios.
#
#   bench/precision.sh [--python PY] [--presets "small base"] [--threads 2] [--steps 20] [--rounds 3]
#
# PY is a Python with PyTorch 2.x (PyPI's torch: python3 -m venv V && V/bin/pip install torch),
# whose CPU autocast runs oneDNN's bf16 kernels; Debian's python3-torch (1.13) works too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=python3; presets="small base"; threads=2; steps=20; rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --python) py=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--python PY] [--presets LIST] [--threads N] [--steps N] [--rounds N]" >&2; exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
torch_ref=${TORCH_REFERENCE:-$root/bench/torch_reference.py}
[ -x "$rosetta" ] || { echo "precision: $rosetta not built" >&2; exit 1; }
[ -f "$torch_ref" ] || { echo "precision: $torch_ref not found (set TORCH_REFERENCE)" >&2; exit 1; }
"$py" -c "import torch" 2>/dev/null || { echo "precision: $py has no torch (see the header)" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for p in $presets; do
  s=$steps; [ "$p" = base ] && s=$(( steps < 8 ? steps : 8 ))  # base steps take seconds
  for r in $(seq "$rounds"); do
    for prec in fp32 bf16; do
      "$rosetta" bench --preset "$p" --threads "$threads" --steps "$s" --precision "$prec" >> "$out/ours.$p.$prec"
    done
    for prec in fp32 bf16; do
      "$py" "$root/bench/torch_autocast.py" --reference "$torch_ref" --preset "$p" --threads "$threads" \
        --steps "$s" --precision "$prec" >> "$out/torch.$p.$prec"
    done
  done
done

"$py" - "$out" "$presets" <<'PY'
import json, os, statistics, sys
out, presets = sys.argv[1], sys.argv[2].split()
def rows(name):
    return [json.loads(l) for l in open(os.path.join(out, name))]
def med(name, key):
    return statistics.median(r[key] for r in rows(name))
first = rows(f"ours.{presets[0]}.bf16")[0]
torch_version = rows(f"torch.{presets[0]}.bf16")[0]["system"]
print(f"CPU {first['isa']}, {first['threads']} threads; {first['kernels']}; {torch_version}")
print()
print("| preset | rosetta fp32 | rosetta bf16 | bf16 / fp32 | MFU fp32 / bf16 | PyTorch fp32 | PyTorch bf16 autocast | rosetta bf16 / PyTorch bf16 |")
print("|---|---|---|---|---|---|---|---|")
for p in presets:
    of, ob = med(f"ours.{p}.fp32", "tgt_tokens_per_s"), med(f"ours.{p}.bf16", "tgt_tokens_per_s")
    tf, tb = med(f"torch.{p}.fp32", "tgt_tokens_per_s"), med(f"torch.{p}.bf16", "tgt_tokens_per_s")
    mf, mb = med(f"ours.{p}.fp32", "mfu"), med(f"ours.{p}.bf16", "mfu")
    print(f"| {p} | {of:,.0f} | {ob:,.0f} | {ob/of:.2f}x | {mf:.2f} / {mb:.2f} | {tf:,.0f} | {tb:,.0f} | {ob/tb:.2f}x |")
PY
