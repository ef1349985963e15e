#!/usr/bin/env python3
"""CTranslate2 as a reference for `rosetta translate` (a benchmark tool, never a dependency).

  ct2.py convert RUN_DIR OUT_DIR [--which best|last|ema] [--quantization float32|int8]
      writes RUN_DIR's translator (a pre-norm Transformer with tied, shared embeddings) as a
      CTranslate2 model: the same weights, the same interleaved sinusoidal positions, the
      SentencePiece model's pieces as both vocabularies.
  ct2.py translate CT2_DIR SPM_MODEL [--beam 4] [--threads 2] [--batch-tokens 2048] [--batches-at-once 1]
      translates stdin line by line to stdout with rosetta's decoding defaults (beam 4, length
      penalty 1, at most 1.5 x source + 10 pieces), and prints the seconds the translation took
      (model loaded, tokenizer included) on stderr as `seconds N`.

Needs a virtual environment with PyPI's ctranslate2, safetensors and sentencepiece.
"""
import argparse
import json
import math
import struct
import sys
import time

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, h in header.items():
        if h["dtype"] != "F32":
            sys.exit(f"ct2.py: {path}: tensor {name} is {h['dtype']}, not F32")
        a, b = h["data_offsets"]
        tensors[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(h["shape"]).copy()
    return tensors, meta


def positions(max_len, dim):
    # rosetta's SinusoidalPositionalEncoding: sin and cos interleaved (CTranslate2's own table
    # puts them in halves, so the table is given explicitly).
    pe = np.zeros((max_len, dim), dtype=np.float32)
    for i in range(0, dim, 2):
        angle = np.arange(max_len, dtype=np.float64) * math.exp(-i * math.log(10000.0) / dim)
        pe[:, i] = np.sin(angle)
        if i + 1 < dim:
            pe[:, i + 1] = np.cos(angle)
    return pe


def convert(args):
    import ctranslate2
    import sentencepiece
    from ctranslate2.specs import common_spec, transformer_spec

    name = {"best": "best", "last": "checkpoint", "ema": "ema"}[args.which]
    w, meta = read_safetensors(f"{args.run_dir}/{name}.safetensors")
    need = {"model.norm_first": "true", "model.share_embeddings": "true", "model.tie_output": "true"}
    for k, v in need.items():
        if meta.get(k) != v:
            sys.exit(f"ct2.py: {args.run_dir}: needs {k}={v}, has {meta.get(k)}")
    if abs(float(meta["model.layer_norm_eps"]) - 1e-5) > 1e-12:
        sys.exit("ct2.py: CTranslate2's layer norm uses eps 1e-5")
    d = int(meta["model.d_model"])
    act = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU}[meta["model.activation"]]
    enc_layers, dec_layers = int(meta["model.encoder_layers"]), int(meta["model.decoder_layers"])
    spec = transformer_spec.TransformerSpec.from_config(
        (enc_layers, dec_layers), int(meta["model.heads"]), pre_norm=True, activation=act)
    pe = positions(int(meta["model.max_len"]), d)

    def linear(dst, *names):
        dst.weight = np.concatenate([w[n + ".weight"] for n in names])
        dst.bias = np.concatenate([w[n + ".bias"] for n in names])

    def norm(dst, n):
        dst.gamma, dst.beta = w[n + ".weight"], w[n + ".bias"]

    def ffn(dst, p, norm_name):
        norm(dst.layer_norm, f"{p}.{norm_name}")
        linear(dst.linear_0, p + ".ff.linear1")
        linear(dst.linear_1, p + ".ff.linear2")

    emb = w["shared_embed.weight"]
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = emb
    dec.embeddings.weight = emb
    for part in (enc, dec):
        part.scale_embeddings = True  # x sqrt(d), as rosetta
        part.position_encodings.encodings = pe
    for i, layer in enumerate(enc.layer):
        p = f"encoder.layers.{i}"
        norm(layer.self_attention.layer_norm, p + ".norm1")
        linear(layer.self_attention.linear[0], *(f"{p}.self_attn.{x}_proj" for x in "qkv"))
        linear(layer.self_attention.linear[1], p + ".self_attn.out_proj")
        ffn(layer.ffn, p, "norm2")
    for i, layer in enumerate(dec.layer):
        p = f"decoder.layers.{i}"
        norm(layer.self_attention.layer_norm, p + ".norm1")
        linear(layer.self_attention.linear[0], *(f"{p}.self_attn.{x}_proj" for x in "qkv"))
        linear(layer.self_attention.linear[1], p + ".self_attn.out_proj")
        norm(layer.attention.layer_norm, p + ".norm2")
        linear(layer.attention.linear[0], p + ".cross_attn.q_proj")
        linear(layer.attention.linear[1], p + ".cross_attn.k_proj", p + ".cross_attn.v_proj")
        linear(layer.attention.linear[2], p + ".cross_attn.out_proj")
        ffn(layer.ffn, p, "norm3")
    norm(enc.layer_norm, "encoder.norm")
    norm(dec.layer_norm, "decoder.norm")
    dec.projection.weight = emb
    dec.projection.bias = w["out_proj.bias"]

    sp = sentencepiece.SentencePieceProcessor(model_file=f"{args.run_dir}/src.model")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    if pieces[:4] != ["<pad>", "<unk>", "<s>", "</s>"]:
        sys.exit(f"ct2.py: unexpected special pieces {pieces[:4]}")
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False

    class Loaded(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    Loaded().convert(args.out_dir, quantization=None if args.quantization == "float32" else args.quantization,
                     force=True)


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
    c = sub.add_parser("convert")
    c.add_argument("run_dir")
    c.add_argument("out_dir")
    c.add_argument("--which", default="best", choices=["best", "last", "ema"])
    c.add_argument("--quantization", default="float32", choices=["float32", "int8"])
    t = sub.add_parser("translate")
    t.add_argument("ct2_dir")
    t.add_argument("spm")
    t.add_argument("--beam", type=int, default=4)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--batch-tokens", type=int, default=2048)
    t.add_argument("--compute-type", default="default")
    t.add_argument("--batches-at-once", type=int, default=1)
    args = ap.parse_args()
    convert(args) if args.cmd == "convert" else translate(args)


if __name__ == "__main__":
    main()
