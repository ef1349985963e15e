#!/usr/bin/env python3
"""CTranslate2 as a reference for `rosetta translate` (a benchmark tool, never a dependency).

A run's model is converted by `rosetta export --format ctranslate2 RUN_DIR CT2_DIR` (docs/export.md).

  ct2.py translate CT2_DIR SPM_MODEL [--beam 4] [--threads 2] [--batch-tokens 2048] [--batches-at-once 1]
      translates stdin line by line to stdout with rosetta's decoding defaults (beam 4, length
      penalty 1, at most 1.5 x source + 10 pieces), and prints the seconds the translation took
      (model loaded, tokenizer included) on stderr as `seconds N`.

Needs a virtual environment with PyPI's ctranslate2 and sentencepiece.
"""
import argparse
import sys
import time


def translate(args):
    import ctranslate2
    import sentencepiece

    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    t0 = time.perf_counter()
    sp = sentencepiece.SentencePieceProcessor(model_file=args.spm)
    # --batches-at-once N: N batches decode side by side (CTranslate2's inter_threads), each on
    # threads / N threads (intra_threads); 1 (the default): one batch at a time on all threads.
    inter = max(1, min(args.batches_at_once, args.threads))
    model = ctranslate2.Translator(args.ct2_dir, device="cpu", intra_threads=max(1, args.threads // inter),
                                   inter_threads=inter, compute_type=args.compute_type)
    src = [sp.encode(line, out_type=str) for line in lines]
    out = [""] * len(src)
    todo = [i for i, s in enumerate(src) if s]
    # rosetta's rule: at most 1.5 x S + 10 pieces. CTranslate2 takes one limit per call, so
    # sentences go in groups of one source length, longest first (rosetta's batches too).
    todo.sort(key=lambda i: -len(src[i]))
    at, pending = 0, []
    while at < len(todo):
        n = len(src[todo[at]])
        rows = max(1, args.batch_tokens // n)
        group = todo[at:at + rows]
        res = model.translate_batch([src[i] for i in group], beam_size=args.beam, length_penalty=1.0,
                                    max_decoding_length=int(1.5 * n + 10), max_batch_size=0,
                                    asynchronous=inter > 1)
        pending.append((group, res))
        at += len(group)
    for group, res in pending:
        for i, r in zip(group, res):
            out[i] = sp.decode((r.result() if inter > 1 else r).hypotheses[0])
    seconds = time.perf_counter() - t0
    sys.stdout.write("".join(line + "\n" for line in out))
    print(f"seconds {seconds:.3f}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("translate")
    t.add_argument("ct2_dir")
    t.add_argument("spm")
    t.add_argument("--beam", type=int, default=4)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--batch-tokens", type=int, default=2048)
    t.add_argument("--compute-type", default="default")
    t.add_argument("--batches-at-once", type=int, default=1)
    args = ap.parse_args()
    translate(args)


if __name__ == "__main__":
    main()
