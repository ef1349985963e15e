"""The file format and the executable spec of rosetta's golden files (make_golden.py writes them).

A safetensors writer and reader with no external package, and `spec_forward`: a from-scratch
forward pass over the rosetta-named tensors of a golden file, which proves that the stored names
and semantics reproduce the stored outputs (make_golden.py runs it on every file it writes).
"""
import json
import math
import struct

import torch

PAD = 0  # the padding id: cross-entropy ignores it, attention masks it

# ----------------------------------------------------------------------------------------------
# safetensors writer / reader (no external package)
# ----------------------------------------------------------------------------------------------
_DT = {torch.float32: ("F32", "<f4", 4), torch.float64: ("F64", "<f8", 8), torch.int32: ("I32", "<i4", 4)}
_DT_BY_NAME = {"F32": (torch.float32, "f", 4), "F64": (torch.float64, "d", 8), "I32": (torch.int32, "i", 4)}


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    code = {torch.float32: "f", torch.float64: "d", torch.int32: "i"}[t.dtype]
    vals = t.reshape(-1).tolist()
    return struct.pack("<%d%s" % (len(vals), code), *vals)


def safetensors_bytes(tensors, metadata):
    """tensors: list of (name, tensor) in the desired order; metadata: dict str->str."""
    header = {}
    chunks = []
    off = 0
    for name, t in tensors:
        assert t.dtype in _DT, (name, t.dtype)
        b = _tensor_bytes(t)
        header[name] = {"dtype": _DT[t.dtype][0], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    meta = {k: str(v) for k, v in metadata.items()}
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(chunks)


def read_safetensors(path):
    """Independent reader; returns (ordered list of (name, tensor), metadata). Validates layout."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    assert hlen % 8 == 0, "header not padded to 8"
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    data = raw[8 + hlen:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values())
    out = []
    expect = 0
    for name, info in header.items():
        dtype, code, size = _DT_BY_NAME[info["dtype"]]
        b, e = info["data_offsets"]
        assert b == expect, "gap or out-of-order tensor %s" % name
        n = 1
        for s in info["shape"]:
            n *= s
        assert e - b == n * size, "bad size for %s" % name
        vals = struct.unpack("<%d%s" % (n, code), data[b:e])
        out.append((name, torch.tensor(vals, dtype=dtype).reshape(info["shape"])))
        expect = e
    assert expect == len(data), "trailing bytes in data section"
    return out, meta


def manual_ce(logits, tout, V, ls):
    lp = torch.log_softmax(logits.reshape(-1, V), -1)
    y = tout.reshape(-1)
    keep = y != PAD
    nll = -lp[keep].gather(1, y[keep].unsqueeze(1)).squeeze(1)
    smooth = -lp[keep].sum(1) / V
    return ((1 - ls) * nll + ls * smooth).mean()


# ----------------------------------------------------------------------------------------------
# from-scratch forward using only rosetta-named tensors from a golden file (executable spec; used by
# the self-check to prove that the stored names/semantics reproduce the stored outputs)
# ----------------------------------------------------------------------------------------------
def spec_forward(W, meta, src, tin=None):
    d, H = int(meta["d_model"]), int(meta["heads"])
    hd = d // H
    eps = float(meta["layer_norm_eps"])
    pre = meta["norm_first"] == "true"
    act = torch.relu if meta["activation"] == "relu" else (lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))))
    pe = W["const.pe"]

    def ln(x, p):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)          # biased variance
        return (x - mu) / torch.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]

    def lin(x, p):
        return x @ W[p + ".weight"].t() + W[p + ".bias"]

    def mha(xq, xkv, p, key_pad, causal):
        B, Tq, _ = xq.shape
        Tk = xkv.shape[1]
        q = lin(xq, p + ".q_proj").view(B, Tq, H, hd).transpose(1, 2)   # head h = features [h*hd, (h+1)*hd)
        k = lin(xkv, p + ".k_proj").view(B, Tk, H, hd).transpose(1, 2)
        v = lin(xkv, p + ".v_proj").view(B, Tk, H, hd).transpose(1, 2)
        s = (q / math.sqrt(hd)) @ k.transpose(-1, -2)                  # [B,H,Tq,Tk]
        mask = key_pad[:, None, None, :].expand(B, H, Tq, Tk)
        if causal:
            mask = mask | torch.ones(Tq, Tk, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        o = torch.softmax(s, -1) @ v
        return lin(o.transpose(1, 2).reshape(B, Tq, d), p + ".out_proj")

    def emb(name, ids):
        return W[name][ids.long()] * math.sqrt(d) + pe[: ids.shape[1]]

    tie = "shared_embed.weight" in W
    src_pad = src == 0
    x = emb("shared_embed.weight" if tie else "src_embed.weight", src)
    i = 0
    while "encoder.layers.%d.norm1.weight" % i in W:
        p = "encoder.layers.%d." % i
        if pre:
            x = x + mha(ln(x, p + "norm1"), ln(x, p + "norm1"), p + "self_attn", src_pad, False)
            x = x + lin(act(lin(ln(x, p + "norm2"), p + "ff.linear1")), p + "ff.linear2")
        else:
            x = ln(x + mha(x, x, p + "self_attn", src_pad, False), p + "norm1")
            x = ln(x + lin(act(lin(x, p + "ff.linear1")), p + "ff.linear2"), p + "norm2")
        i += 1
    mem = ln(x, "encoder.norm")
    if tin is None:
        return mem
    tgt_pad = tin == 0
    y = emb("shared_embed.weight" if tie else "tgt_embed.weight", tin)
    i = 0
    while "decoder.layers.%d.norm1.weight" % i in W:
        p = "decoder.layers.%d." % i
        if pre:
            h = ln(y, p + "norm1")
            y = y + mha(h, h, p + "self_attn", tgt_pad, True)
            y = y + mha(ln(y, p + "norm2"), mem, p + "cross_attn", src_pad, False)
            y = y + lin(act(lin(ln(y, p + "norm3"), p + "ff.linear1")), p + "ff.linear2")
        else:
            y = ln(y + mha(y, y, p + "self_attn", tgt_pad, True), p + "norm1")
            y = ln(y + mha(y, mem, p + "cross_attn", src_pad, False), p + "norm2")
            y = ln(y + lin(act(lin(y, p + "ff.linear1")), p + "ff.linear2"), p + "norm3")
        i += 1
    y = ln(y, "decoder.norm")
    wout = W["shared_embed.weight"] if tie else W["out_proj.weight"]
    return y @ wout.t() + W["out_proj.bias"]


def spec_check(path):
    """Load a golden nn file, recompute output/loss/grads with spec_forward in float64, compare."""
    tensors, meta = read_safetensors(path)
    T = dict(tensors)
    pnames = [n for n, _ in tensors if not n.split(".")[0] in ("input", "output", "grad", "const")]
    W = {n: T[n].double().requires_grad_(n in pnames) for n in pnames}
    W["const.pe"] = T["const.pe"].double()
    if meta["model"] == "encoder_only":
        out = spec_forward(W, meta, T["input.src"])
        loss = ((out + 1) ** 2).mean()
        ref = T["output.memory"]
    else:
        out = spec_forward(W, meta, T["input.src"], T["input.tgt_in"])
        V = int(meta["tgt_vocab"])
        loss = manual_ce(out, T["input.tgt_out"].long(), V, float(meta["label_smoothing"]))
        ref = T["output.logits"]
    loss.backward()
    err = [(out - ref.double()).abs().max().item(), abs(loss.item() - T["output.loss"].item())]
    err.append(max((W[n].grad - T["grad." + n].double()).abs().max().item() for n in pnames))
    assert set("grad." + n for n in pnames) == set(n for n in T if n.startswith("grad.")), path
    assert max(err) < 2e-6, (path, err)
    return err
