#!/usr/bin/python3
"""Generate the PyTorch golden files for rosetta's [parity] tests.

Run with the Debian system python (PyTorch 1.13):

    /usr/bin/python3 tests/golden/make_golden.py            # writes tests/golden/*.safetensors
    /usr/bin/python3 tests/golden/make_golden.py --check    # regenerate in memory, compare with files on disk

Everything is deterministic (fixed seeds, one thread): re-running produces byte-identical files.
See tests/golden/README.md for the file contents and docs/pytorch-mapping.md for the name mapping.

Precision policy (nn cases):
  * parameters are initialised by PyTorch in float32 (then some are perturbed, see `perturb`),
    so every stored weight is an exact float32 value;
  * the reference forward/backward is then recomputed in float64 from exactly those float32
    weights (and the float32-rounded positional encoding) and the results are rounded to float32
    for storage.  The golden is thus the "true" answer for the float32 inputs, and a float32
    implementation should be within normal float32 rounding error of it;
  * the same computation done by PyTorch in float32 is compared with the float64 reference and
    the max differences are recorded in the metadata (`f32_vs_f64.*`) as tolerance hints.
Optimizer trajectories are computed by torch.optim in float32 (like the C++ optimizers).
"""
import argparse
import hashlib
import math
import os
import sys

import torch
import torch.nn as nn

from golden_spec import PAD, manual_ce, read_safetensors, safetensors_bytes, spec_check

HERE = os.path.dirname(os.path.abspath(__file__))
BOS, EOS = 2, 3         # PAD (0) is golden_spec's
FIRST_WORD = 4          # real (non-special) token ids are drawn from [FIRST_WORD, vocab)

torch.set_num_threads(1)

# ----------------------------------------------------------------------------------------------
# the model (== bench/torch_reference.py's Seq2Seq, with explicit masks)
# ----------------------------------------------------------------------------------------------
def sinusoidal_pe(n, d):
    """PE[pos,2i] = sin(pos / 10000^(2i/d)), PE[pos,2i+1] = cos(same); computed in float64,
    rounded to float32 (that float32 table is what the reference uses)."""
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    ang = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe.float()


class Seq2Seq(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.d = d
        self.cfg = cfg
        self.src_embed = nn.Embedding(cfg["src_vocab"], d)
        if cfg["encoder_only"]:
            layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ff"], 0.0, cfg["activation"],
                                               1e-5, batch_first=True, norm_first=cfg["norm_first"])
            self.encoder = nn.TransformerEncoder(layer, cfg["encoder_layers"], nn.LayerNorm(d, eps=1e-5),
                                                 enable_nested_tensor=False)
            # same init as nn.Transformer._reset_parameters
            for p in self.encoder.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
        else:
            self.tgt_embed = nn.Embedding(cfg["tgt_vocab"], d)
            self.core = nn.Transformer(d, cfg["heads"], cfg["encoder_layers"], cfg["decoder_layers"], cfg["ff"],
                                       0.0, cfg["activation"], batch_first=True, norm_first=cfg["norm_first"])
            self.out_proj = nn.Linear(d, cfg["tgt_vocab"])
            if cfg["tie"]:
                # one shared [V, d] matrix; N(0, 1/d) init (usual for tied embeddings: keeps logits O(1))
                assert cfg["src_vocab"] == cfg["tgt_vocab"]
                with torch.no_grad():
                    self.src_embed.weight.mul_(d ** -0.5)
                self.tgt_embed.weight = self.src_embed.weight
                self.out_proj.weight = self.src_embed.weight
        self.register_buffer("pe", sinusoidal_pe(64, d))

    def embed(self, emb, ids):
        return emb(ids) * math.sqrt(self.d) + self.pe[: ids.size(1)]

    def forward(self, src, tgt_in=None):
        src_pad = src == PAD
        x = self.embed(self.src_embed, src)
        if self.cfg["encoder_only"]:
            return self.encoder(x, src_key_padding_mask=src_pad)
        tgt_pad = tgt_in == PAD
        T = tgt_in.size(1)
        causal = torch.triu(torch.full((T, T), float("-inf"), dtype=x.dtype), diagonal=1)
        h = self.core(x, self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                      src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                      memory_key_padding_mask=src_pad)
        return self.out_proj(h)


def perturb(model, gen):
    """Default init has LayerNorm gamma=1, beta=0 and zero attention biases; make them random so
    that a swapped/missing bias or norm parameter is caught by the parity tests."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name.endswith("norm3.weight") \
                    or name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


# ----------------------------------------------------------------------------------------------
# torch name  <->  rosetta name
# ----------------------------------------------------------------------------------------------
def torch_to_ours(sd, tie=False):
    """Map a state_dict (or a dict of grads) of `Seq2Seq` above to rosetta names.
    Returns an ordered list of (name, tensor)."""
    out = []

    def layer(prefix_t, prefix_o, attn_names):
        i = 0
        while (prefix_t + "%d.norm1.weight" % i) in sd:
            lt, lo = prefix_t + "%d." % i, prefix_o + "%d." % i
            for a_t, a_o in attn_names:
                w = sd[lt + a_t + ".in_proj_weight"]
                b = sd[lt + a_t + ".in_proj_bias"]
                d = w.shape[1]
                for j, n in enumerate(("q_proj", "k_proj", "v_proj")):
                    out.append((lo + a_o + "." + n + ".weight", w[j * d:(j + 1) * d]))
                    out.append((lo + a_o + "." + n + ".bias", b[j * d:(j + 1) * d]))
                out.append((lo + a_o + ".out_proj.weight", sd[lt + a_t + ".out_proj.weight"]))
                out.append((lo + a_o + ".out_proj.bias", sd[lt + a_t + ".out_proj.bias"]))
            for n in ("norm1", "norm2", "norm3"):
                if lt + n + ".weight" in sd:
                    out.append((lo + n + ".weight", sd[lt + n + ".weight"]))
                    out.append((lo + n + ".bias", sd[lt + n + ".bias"]))
            for n in ("linear1", "linear2"):
                out.append((lo + "ff." + n + ".weight", sd[lt + n + ".weight"]))
                out.append((lo + "ff." + n + ".bias", sd[lt + n + ".bias"]))
            i += 1

    if tie:
        out.append(("shared_embed.weight", sd["src_embed.weight"]))
    else:
        out.append(("src_embed.weight", sd["src_embed.weight"]))
        if "tgt_embed.weight" in sd:
            out.append(("tgt_embed.weight", sd["tgt_embed.weight"]))
    enc = "core.encoder." if "core.encoder.norm.weight" in sd else "encoder."
    layer(enc + "layers.", "encoder.layers.", [("self_attn", "self_attn")])
    out.append(("encoder.norm.weight", sd[enc + "norm.weight"]))
    out.append(("encoder.norm.bias", sd[enc + "norm.bias"]))
    if "core.decoder.norm.weight" in sd:
        layer("core.decoder.layers.", "decoder.layers.", [("self_attn", "self_attn"), ("multihead_attn", "cross_attn")])
        out.append(("decoder.norm.weight", sd["core.decoder.norm.weight"]))
        out.append(("decoder.norm.bias", sd["core.decoder.norm.bias"]))
        if not tie:
            out.append(("out_proj.weight", sd["out_proj.weight"]))
        out.append(("out_proj.bias", sd["out_proj.bias"]))
    return out


def ours_to_torch(named):
    """Inverse of torch_to_ours (for the self-check): dict rosetta name -> torch state_dict."""
    named = dict(named)
    sd = {}
    tie = "shared_embed.weight" in named
    enc_only = not any(k.startswith("decoder.") for k in named)
    enc = "encoder." if enc_only else "core.encoder."
    for k, v in named.items():
        if k == "shared_embed.weight":
            sd["src_embed.weight"] = sd["tgt_embed.weight"] = sd["out_proj.weight"] = v
            continue
        if k in ("src_embed.weight", "tgt_embed.weight", "out_proj.weight", "out_proj.bias"):
            sd[k] = v
            continue
        t = k.replace("encoder.", enc, 1) if k.startswith("encoder.") else "core." + k
        t = t.replace(".cross_attn.", ".multihead_attn.").replace(".ff.linear", ".linear")
        if not any("." + n + "." in t for n in ("q_proj", "k_proj", "v_proj")):
            sd[t] = v
    # re-pack q/k/v
    for k in list(named):
        if ".q_proj.weight" in k:
            base = k[: -len(".q_proj.weight")]
            tb = (base.replace("encoder.", enc, 1) if base.startswith("encoder.") else "core." + base)
            tb = tb.replace(".cross_attn", ".multihead_attn")
            sd[tb + ".in_proj_weight"] = torch.cat([named[base + ".%s_proj.weight" % c] for c in "qkv"], 0)
            sd[tb + ".in_proj_bias"] = torch.cat([named[base + ".%s_proj.bias" % c] for c in "qkv"], 0)
    return sd


# ----------------------------------------------------------------------------------------------
# batches
# ----------------------------------------------------------------------------------------------
def make_src(gen, vocab, lens, S):
    src = torch.full((len(lens), S), PAD, dtype=torch.long)
    for b, n in enumerate(lens):
        assert 1 <= n <= S
        src[b, :n] = torch.randint(FIRST_WORD, vocab, (n,), generator=gen)
    return src


def make_tgt(gen, vocab, lens, T):
    """lens = number of real target words; tgt_in = [bos, w...], tgt_out = [w..., eos], pad after."""
    B = len(lens)
    tin = torch.full((B, T), PAD, dtype=torch.long)
    tout = torch.full((B, T), PAD, dtype=torch.long)
    for b, n in enumerate(lens):
        assert 0 <= n <= T - 1
        w = torch.randint(FIRST_WORD, vocab, (n,), generator=gen)
        tin[b, 0] = BOS
        tin[b, 1:n + 1] = w
        tout[b, :n] = w
        tout[b, n] = EOS
    return tin, tout


# ----------------------------------------------------------------------------------------------
# nn cases
# ----------------------------------------------------------------------------------------------
NN_CASES = [
    dict(case="encoder_only", seed=101, encoder_only=True, d_model=16, heads=2, ff=32, encoder_layers=2,
         decoder_layers=0, src_vocab=13, tgt_vocab=0, activation="relu", norm_first=True, label_smoothing=0.0,
         tie=False, src_lens=[6, 4, 1], src_len=6),
    dict(case="full_model", seed=102, encoder_only=False, d_model=32, heads=4, ff=64, encoder_layers=2,
         decoder_layers=2, src_vocab=17, tgt_vocab=19, activation="relu", norm_first=True, label_smoothing=0.0,
         tie=False, src_lens=[5, 5], src_len=5, tgt_lens=[5, 5], tgt_len=6),
    dict(case="full_model_padding", seed=103, encoder_only=False, d_model=16, heads=2, ff=48, encoder_layers=2,
         decoder_layers=2, src_vocab=11, tgt_vocab=13, activation="relu", norm_first=True, label_smoothing=0.0,
         tie=False, src_lens=[7, 3, 1], src_len=7, tgt_lens=[5, 2, 0], tgt_len=6),
    dict(case="full_model_smoothing", seed=104, encoder_only=False, d_model=32, heads=4, ff=64, encoder_layers=1,
         decoder_layers=2, src_vocab=15, tgt_vocab=20, activation="relu", norm_first=True, label_smoothing=0.1,
         tie=False, src_lens=[4, 6, 2], src_len=6, tgt_lens=[6, 3, 1], tgt_len=7),
    dict(case="full_model_gelu_postnorm", seed=105, encoder_only=False, d_model=32, heads=2, ff=64,
         encoder_layers=2, decoder_layers=1, src_vocab=14, tgt_vocab=16, activation="gelu", norm_first=False,
         label_smoothing=0.0, tie=False, src_lens=[5, 3], src_len=5, tgt_lens=[3, 1], tgt_len=4),
    dict(case="full_model_tied", seed=106, encoder_only=False, d_model=16, heads=4, ff=32, encoder_layers=1,
         decoder_layers=1, src_vocab=18, tgt_vocab=18, activation="relu", norm_first=True, label_smoothing=0.1,
         tie=True, src_lens=[5, 2, 4], src_len=5, tgt_lens=[4, 2, 0], tgt_len=5),
]


def run_model(model, src, tin, tout, cfg):
    model.zero_grad(set_to_none=True)
    model.train()  # dropout is 0; train mode keeps PyTorch off the nested-tensor inference fast path
    out = model(src, tin)
    if cfg["encoder_only"]:
        loss = ((out + 1.0) ** 2).mean()
    else:
        V = cfg["tgt_vocab"]
        loss = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=cfg["label_smoothing"])(
            out.reshape(-1, V), tout.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return out.detach().clone(), loss.detach().clone(), grads




def build_nn_case(cfg):
    torch.manual_seed(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"] + 1000)
    model = Seq2Seq(cfg)
    perturb(model, gen)
    B = len(cfg["src_lens"])
    src = make_src(gen, cfg["src_vocab"], cfg["src_lens"], cfg["src_len"])
    if cfg["encoder_only"]:
        tin = tout = None
    else:
        assert len(cfg["tgt_lens"]) == B
        tin, tout = make_tgt(gen, cfg["tgt_vocab"], cfg["tgt_lens"], cfg["tgt_len"])

    # float32 run (tolerance hint only)
    out32, loss32, g32 = run_model(model, src, tin, tout, cfg)
    # float64 reference from the same float32 weights / float32 PE table
    model.double()
    out64, loss64, g64 = run_model(model, src, tin, tout, cfg)

    tie = cfg["tie"]
    sd = {n: p.detach() for n, p in model.named_parameters()}
    if tie:
        sd["tgt_embed.weight"] = sd["out_proj.weight"] = sd["src_embed.weight"]
    weights = torch_to_ours(sd, tie)
    grads64 = torch_to_ours(g64, tie)
    grads32 = dict(torch_to_ours(g32, tie))

    # ---- self-checks -------------------------------------------------------------------------
    if not cfg["encoder_only"]:
        V = cfg["tgt_vocab"]
        ref = manual_ce(out64, tout, V, cfg["label_smoothing"])
        assert abs(ref.item() - loss64.item()) < 1e-12, (ref.item(), loss64.item())
    assert torch.isfinite(out64).all() and all(torch.isfinite(g).all() for _, g in grads64)
    # mapping round trip
    back = ours_to_torch(weights)
    for k, v in sd.items():
        assert torch.equal(back[k], v), k
    if tie:
        # tied gradient == sum of the gradients of three untied copies
        cfg2 = dict(cfg, tie=False)
        torch.manual_seed(0)
        m2 = Seq2Seq(cfg2).double()
        sd2 = dict(sd)
        m2.load_state_dict({**sd2, "pe": model.pe}, strict=True)
        _, l2, g2 = run_model(m2, src, tin, tout, cfg2)
        s = g2["src_embed.weight"] + g2["tgt_embed.weight"] + g2["out_proj.weight"]
        assert torch.allclose(s, g64["src_embed.weight"], rtol=0, atol=1e-13)
        assert abs(l2.item() - loss64.item()) < 1e-13

    def maxdiff(a, b):
        return (a.double() - b.double()).abs().max().item()

    meta = {
        "case": cfg["case"],
        "model": "encoder_only" if cfg["encoder_only"] else "seq2seq",
        "d_model": cfg["d_model"], "heads": cfg["heads"], "ff": cfg["ff"],
        "encoder_layers": cfg["encoder_layers"], "decoder_layers": cfg["decoder_layers"],
        "src_vocab": cfg["src_vocab"], "tgt_vocab": cfg["tgt_vocab"],
        "activation": cfg["activation"], "norm_first": "true" if cfg["norm_first"] else "false",
        "label_smoothing": repr(cfg["label_smoothing"]), "tie": "true" if tie else "false",
        "pad_id": PAD, "bos_id": BOS, "eos_id": EOS, "layer_norm_eps": "1e-05", "dropout": "0.0",
        "batch": B, "src_len": cfg["src_len"], "tgt_len": cfg.get("tgt_len", 0),
        "emb_scale": "sqrt(d_model)",
        "pe": "sinusoidal PE[pos,2i]=sin(pos/10000^(2i/d)) PE[pos,2i+1]=cos(..), f64 then rounded to f32; "
              "stored as const.pe",
        "loss": ("((memory+1)^2).mean() over all B*S*d elements incl. padded positions" if cfg["encoder_only"]
                 else "CrossEntropyLoss(ignore_index=pad_id, label_smoothing) mean over non-pad targets"),
        "reference_dtype": "float64 compute from float32 weights, stored as float32",
        "seed": cfg["seed"], "torch_version": torch.__version__.split("+")[0],
        "f32_vs_f64.output_max_abs": "%.3e" % maxdiff(out32, out64),
        "f32_vs_f64.loss_abs": "%.3e" % maxdiff(loss32, loss64),
        "f32_vs_f64.grad_max_abs": "%.3e" % max(maxdiff(grads32[n], g) for n, g in grads64),
        "output_max_abs": "%.3e" % out64.abs().max().item(),
        "grad_max_abs": "%.3e" % max(g.abs().max().item() for _, g in grads64),
    }
    tensors = [(n, w.float()) for n, w in weights]
    tensors.append(("input.src", src.int()))
    if not cfg["encoder_only"]:
        tensors.append(("input.tgt_in", tin.int()))
        tensors.append(("input.tgt_out", tout.int()))
    S = cfg["src_len"]
    T = cfg.get("tgt_len", 0)
    tensors.append(("const.pe", model.pe[: max(S, T)].float()))
    tensors.append(("output.memory" if cfg["encoder_only"] else "output.logits", out64.float()))
    tensors.append(("output.loss", loss64.float().reshape(1)))
    tensors += [("grad." + n, g.float()) for n, g in grads64]
    return tensors, meta, loss64.item()


# ----------------------------------------------------------------------------------------------
# optimizer trajectories
# ----------------------------------------------------------------------------------------------
OPT_PARAMS = [("w", (3, 4)), ("b", (5,)), ("m", (2, 2))]
OPT_STEPS = 25
NOAM = dict(factor=2.0, d_model=64, warmup=4)


def noam(step):
    return NOAM["factor"] * NOAM["d_model"] ** -0.5 * min(step ** -0.5, step * NOAM["warmup"] ** -1.5)


OPT_RUNS = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("sgd_nesterov", "SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("adam", "Adam", dict(lr=1e-2, betas=(0.9, 0.98), eps=1e-9)),
    ("adam_l2", "Adam", dict(lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)),
    ("adamw", "AdamW", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("adam_noam", "Adam", dict(lr=1.0, betas=(0.9, 0.98), eps=1e-9)),
]


def build_optim():
    gen = torch.Generator().manual_seed(7)
    init = {n: torch.randn(s, generator=gen, dtype=torch.float32) for n, s in OPT_PARAMS}
    grads = [{n: torch.randn(s, generator=gen, dtype=torch.float32) for n, s in OPT_PARAMS}
             for _ in range(OPT_STEPS)]
    tensors = [("init." + n, init[n]) for n, _ in OPT_PARAMS]
    for k in range(1, OPT_STEPS + 1):
        tensors += [("step%d.grad.%s" % (k, n), grads[k - 1][n]) for n, _ in OPT_PARAMS]
    meta = {"case": "optim_trajectories", "params": ",".join(n for n, _ in OPT_PARAMS), "steps": OPT_STEPS,
            "runs": ",".join(r[0] for r in OPT_RUNS), "dtype": "float32",
            "torch_version": torch.__version__.split("+")[0]}
    final = {}
    for run, cls, hp in OPT_RUNS:
        params = [nn.Parameter(init[n].clone()) for n, _ in OPT_PARAMS]
        opt = getattr(torch.optim, cls)(params, **hp)
        full = dict(opt.defaults)
        sched = None
        lrs = []
        if run == "adam_noam":
            # LambdaLR calls the lambda with 0 at construction; the k-th optimizer step (k>=1) uses noam(k)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: noam(e + 1))
        for k in range(1, OPT_STEPS + 1):
            lrs.append(opt.param_groups[0]["lr"])
            for p, (n, _) in zip(params, OPT_PARAMS):
                p.grad = grads[k - 1][n].clone()
            opt.step()
            if sched is not None:
                sched.step()
            tensors += [("%s.step%d.%s" % (run, k, n), p.detach().clone()) for p, (n, _) in zip(params, OPT_PARAMS)]
        if sched is not None:
            tensors.append(("%s.lr" % run, torch.tensor(lrs, dtype=torch.float64)))
            for k, lr in enumerate(lrs, 1):
                assert lr == noam(k) * hp["lr"], (k, lr, noam(k))
        meta[run + ".optimizer"] = cls
        for key in ("lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad"):
            if key in full:
                v = full[key]
                if key == "betas":
                    meta[run + ".beta1"], meta[run + ".beta2"] = repr(v[0]), repr(v[1])
                elif isinstance(v, bool):
                    meta[run + "." + key] = "true" if v else "false"
                else:
                    meta[run + "." + key] = repr(float(v))
        if sched is not None:
            meta[run + ".schedule"] = ("noam: lr_k = base_lr * factor * d_model^-0.5 * min(k^-0.5, k*warmup^-1.5), "
                                       "k = 1-based optimizer step; per-step lr in %s.lr (F64)" % run)
            meta[run + ".noam_factor"] = repr(NOAM["factor"])
            meta[run + ".noam_d_model"] = str(NOAM["d_model"])
            meta[run + ".noam_warmup"] = str(NOAM["warmup"])
        final[run] = [p.detach().clone() for p in params]
    _check_optim_by_hand(init, grads, final)
    return tensors, meta


def _check_optim_by_hand(init, grads, final):
    """Re-derive the trajectories with the documented formulas in float64 (sanity check)."""
    names = [n for n, _ in OPT_PARAMS]
    worst = 0.0
    per_run = {}
    for run, cls, hp in OPT_RUNS:
        p = {n: init[n].double() for n in names}
        st = {n: {} for n in names}
        for k in range(1, OPT_STEPS + 1):
            lr = hp["lr"] * (noam(k) if run == "adam_noam" else 1.0)
            for n in names:
                g = grads[k - 1][n].double()
                s = st[n]
                wd = hp.get("weight_decay", 0.0)
                if cls == "SGD":
                    g = g + wd * p[n]
                    mom = hp.get("momentum", 0.0)
                    if mom:
                        s["buf"] = g.clone() if k == 1 else mom * s["buf"] + g
                        g = g + mom * s["buf"] if hp.get("nesterov") else s["buf"]
                    p[n] = p[n] - lr * g
                else:
                    b1, b2 = hp["betas"]
                    if cls == "AdamW":
                        p[n] = p[n] * (1 - lr * wd)
                    else:
                        g = g + wd * p[n]
                    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
                    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
                    # torch 1.13: p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
                    p[n] = p[n] - (lr / (1 - b1 ** k)) * s["m"] / (s["v"].sqrt() / math.sqrt(1 - b2 ** k) + hp["eps"])
        for i, n in enumerate(names):
            err = (p[n] - final[run][i].double()).abs().max().item()
            assert err < 1e-5, (run, n, err)
            worst = max(worst, err)
            per_run[run] = max(per_run.get(run, 0.0), err)
    print("optimizer trajectories vs float64 formulas: max |diff| %.1e  (%s)" % (worst, ", ".join("%s %.0e" % kv for kv in per_run.items())))


# ----------------------------------------------------------------------------------------------
def build_all():
    files = {}
    losses = {}
    for cfg in NN_CASES:
        tensors, meta, loss = build_nn_case(cfg)
        files[cfg["case"] + ".safetensors"] = (safetensors_bytes(tensors, meta), tensors)
        losses[cfg["case"]] = loss
    tensors, meta = build_optim()
    files["optim_trajectories.safetensors"] = (safetensors_bytes(tensors, meta), tensors)
    return files, losses


def verify_file(path, tensors):
    got, meta = read_safetensors(path)
    assert [n for n, _ in got] == [n for n, _ in tensors], path
    for (n, a), (_, b) in zip(got, tensors):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (path, n)
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="don't write; compare with files on disk")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    files, losses = build_all()
    ok = True
    for name, (blob, tensors) in files.items():
        path = os.path.join(a.out, name)
        if a.check:
            with open(path, "rb") as f:
                same = f.read() == blob
            ok &= same
            print("%-40s %s" % (name, "identical" if same else "DIFFERENT"))
        else:
            with open(path, "wb") as f:
                f.write(blob)
        meta = verify_file(path, tensors)
        if meta["case"] != "optim_trajectories":
            err = spec_check(path)
            print("  spec_forward max |diff| output %.1e loss %.1e grad %.1e" % tuple(err))
        print("%-40s %8d bytes  sha256 %s" % (name, len(blob), hashlib.sha256(blob).hexdigest()[:16]))
    for k, v in losses.items():
        print("loss %-28s %.9g" % (k, v))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
