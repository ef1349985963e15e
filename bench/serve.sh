#!/usr/bin/env bash
# rosetta serve under load, against rosetta translate on the same sentences (issue 69):
#   offline:      `rosetta translate` of the test set's sources in one batch job (whole process,
#                 the model's loading included), with the same beam, precision and threads;
#   serve:        `rosetta serve` (batching across requests), CLIENTS concurrent clients of
#                 bench/serve_client.py sending one sentence per request, back to back;
#   no-batching:  the same with `rosetta serve --no-batching` (each request decoded on its own).
# For each: sentences/s, and for the servers p50/p99 latency, errors and answers equal to the
# offline translation of their own line (all, and among lines of one sentence: a line of several
# is translated sentence by sentence by the server, whole by the offline job). The client runs on
# the same machine: its CPU time is printed beside (on 2 cores it takes a share from the decoders).
#
#   bench/serve.sh --model RUN [--threads 2] [--clients 64] [--rounds 1] [--beam 4] [--precision auto]
#                  [--input FILE]     # default: data/de-en/test.tsv's first column (1,059 sentences)
#
# Run it alone on the machine: it measures time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=""; threads=2; clients=64; rounds=1; beam=4; precision=auto; input=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --beam) beam=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    *) echo "usage: $0 --model RUN [--threads N] [--clients N] [--rounds N] [--beam N] [--precision P]" \
         "[--input FILE]" >&2
       exit 2 ;;
  esac
done
rosetta=${ROSETTA_BIN:-$root/build/rosetta}
[ -n "$model" ] || { echo "serve: --model RUN is required (a run of README command (1): runs/de-en)" >&2; exit 2; }
[ -x "$rosetta" ] || { echo "serve: $rosetta not built" >&2; exit 1; }
out=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
if [ -z "$input" ]; then
  if [ ! -f "$root/data/de-en/test.tsv" ]; then
    echo "serve: no data/de-en/test.tsv (scripts/prepare-corpus.sh data/de-en)" >&2
    exit 1
  fi
  cut -f1 "$root/data/de-en/test.tsv" > "$out/one.de"
else
  cp "$input" "$out/one.de"
fi
for _ in $(seq "$rounds"); do cat "$out/one.de"; done > "$out/all.de"
n=$(wc -l < "$out/all.de")
decode=(--beam "$beam" --precision "$precision" --threads "$threads")

start=$(date +%s.%N)
"$rosetta" translate --model "$model" "${decode[@]}" --input "$out/all.de" --output "$out/offline.en" 2>/dev/null
end=$(date +%s.%N)
offline_s=$(python3 -c "print($end - $start)")
head -n "$(wc -l < "$out/one.de")" "$out/offline.en" > "$out/expect.en"

# serve NAME FLAGS...: starts a server on a free port, runs the client against it, stops it (SIGTERM).
serve() {
  local name=$1
  shift
  "$rosetta" serve --model "$model" --port 0 "${decode[@]}" "$@" 2> "$out/$name.log" &
  server_pid=$!
  local port=""
  for _ in $(seq 600); do
    port=$(grep -o 'listening on http://[^ ]*' "$out/$name.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/$name.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "serve: $name did not start" >&2; exit 1; }
  python3 "$root/bench/serve_client.py" --port "$port" --input "$out/one.de" --expect "$out/expect.en" \
    --clients "$clients" --rounds "$rounds" > "$out/$name.json"
  kill -TERM "$server_pid"
  wait "$server_pid" || { echo "serve: $name exited with status $?" >&2; exit 1; }
  server_pid=""
}
serve batching
serve no-batching --no-batching

python3 - "$out" "$n" "$offline_s" "$clients" "$threads" "$beam" "$precision" <<'PY'
import json, os, sys
out, n, offline_s, clients, threads, beam, precision = sys.argv[1:]
n, offline_s = int(n), float(offline_s)
offline = n / offline_s
print(f"{n} sentences, beam {beam}, precision {precision}, {threads} threads, {clients} clients")
print(f"  translate (offline, whole process): {offline:8.1f} sentences/s ({offline_s:.2f} s)")
for name in ("batching", "no-batching"):
    r = json.load(open(os.path.join(out, name + ".json")))
    rate = r["sentences_per_s"]
    print(f"  serve {name:<12} {rate:8.1f} sentences/s ({rate / offline:.0%} of offline)"
          f"  p50 {r['p50_ms']:.0f} ms  p99 {r['p99_ms']:.0f} ms  errors {r['errors']}"
          f"  equal to offline {r['matched']}/{r['sentences']}"
          f" (one-sentence lines {r['one_sentence_matched']}/{r['one_sentence']})  client CPU {r['client_cpu_s']} s")
    for e in r["first_errors"]:
        print("    error:", e)
    for m in r["first_mismatches"]:
        print("    differs:", json.dumps(m, ensure_ascii=False))
b = json.load(open(os.path.join(out, "batching.json")))
nb = json.load(open(os.path.join(out, "no-batching.json")))
print(f"  batching across requests: {b['sentences_per_s'] / nb['sentences_per_s']:.1f}x the server without it")
PY
