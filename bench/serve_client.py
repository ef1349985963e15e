#!/usr/bin/env python3
"""Load client for `rosetta serve` (bench/serve.sh): CLIENTS threads, each with its own keep-alive
connection, send one sentence per request to POST /translate, back to back, taking the next
sentence of the input as soon as their last answer came, until every sentence is sent ROUNDS times.

  serve_client.py --port P --input test.de --expect offline.en [--clients 64] [--rounds 1]

Prints one JSON line: sentences, wall seconds, sentences/s, p50/p99/max latency in ms, errors (any
answer but a 200 with a translatedText string, or a connection that failed), and how many answers
equal the offline translation of their own sentence (`--expect`, line-aligned with `--input`), with
the first few that do not. Standard library only.
"""
import argparse
import http.client
import json
import re
import resource
import statistics
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--expect", required=True)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--source", default="de")
    p.add_argument("--target", default="en")
    a = p.parse_args()
    sentences = open(a.input, encoding="utf-8").read().split("\n")
    expected = open(a.expect, encoding="utf-8").read().split("\n")
    if sentences and sentences[-1] == "":
        sentences.pop()
    expected = expected[: len(sentences)]
    if len(expected) != len(sentences):
        sys.exit(f"serve_client: {a.expect} has {len(expected)} lines, {a.input} {len(sentences)}")
    total = len(sentences) * a.rounds
    answers = [None] * total
    latencies = [0.0] * total
    errors = []
    lock = threading.Lock()
    next_index = [0]

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=120)
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= total:
                break
            body = json.dumps({"q": sentences[i % len(sentences)], "source": a.source, "target": a.target})
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                latencies[i] = time.perf_counter() - t0
                answer = json.loads(data).get("translatedText") if resp.status == 200 else None
                if not isinstance(answer, str):
                    raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
                answers[i] = answer
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    errors.append(f"sentence {i % len(sentences) + 1}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=120)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(a.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done = [latencies[i] * 1e3 for i in range(total) if answers[i] is not None]
    mismatches = [
        {"sentence": i % len(sentences) + 1, "got": answers[i], "offline": expected[i % len(sentences)]}
        for i in range(total)
        if answers[i] is not None and answers[i] != expected[i % len(sentences)]
    ]
    # Lines the server translates as one sentence (split_sentences' rule, translator/src/
    # sentences.cpp: a sentence end, closing quotes or brackets, then whitespace): among them a
    # difference from the offline translation comes from the batch alone; a line of several
    # sentences is translated sentence by sentence, which the offline job does not do.
    several = re.compile("[.!?\u2026][\"')\\]}\u201c\u201d\u2018\u2019\u00bb\u00ab\u203a\u2039]*\\s+\\S")
    one = [i for i in range(total) if answers[i] is not None and not several.search(sentences[i % len(sentences)])]
    q = statistics.quantiles(done, n=100) if len(done) >= 2 else [float("nan")] * 99
    print(json.dumps({
        "sentences": total,
        "clients": a.clients,
        "wall_s": round(wall, 3),
        "sentences_per_s": round(total / wall, 2),
        "p50_ms": round(q[49], 1),
        "p99_ms": round(q[98], 1),
        "max_ms": round(max(done), 1) if done else None,
        "errors": len(errors),
        "first_errors": errors[:3],
        "answered": len(done),
        "matched": len(done) - len(mismatches),
        "one_sentence": len(one),
        "one_sentence_matched": sum(answers[i] == expected[i % len(sentences)] for i in one),
        "first_mismatches": mismatches[:3],
        "client_cpu_s": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime
                              + resource.getrusage(resource.RUSAGE_SELF).ru_stime, 2),
    }))


if __name__ == "__main__":
    main()
