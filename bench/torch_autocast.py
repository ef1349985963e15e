#!/usr/bin/env python3
"""PyTorch's training throughput with bf16 autocast, on the shapes of torch_reference.py.

The model, presets and loop are torch_reference.py's (loaded from --reference, so both measure
one model); only the forward pass and the loss run under torch.autocast("cpu", bfloat16), as a
PyTorch user trains in mixed precision on a CPU (oneDNN's AVX512_BF16 or AMX kernels where the
CPU has them). Prints one JSON line like the reference's, with "precision". --precision fp32
runs the same loop without autocast.

    python torch_autocast.py --reference bench/torch_reference.py --preset small
"""
import argparse, importlib.util, json, resource, time, warnings

warnings.filterwarnings("ignore")  # torch 2.x warns about numpy and nested tensors

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reference", required=True, help="path of torch_reference.py")
    p.add_argument("--preset", default="small")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    a = p.parse_args()
    spec = importlib.util.spec_from_file_location("torch_reference", a.reference)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    vocab, d, h, ff, ne, nd, batch, sl, tl = ref.PRESETS[a.preset]
    model = ref.Seq2Seq(vocab, d, h, ff, ne, nd, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    src = torch.randint(1, vocab, (batch, sl))
    tgt = torch.randint(1, vocab, (batch, tl + 1))
    bf16 = a.precision == "bf16"
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt[:, :-1])
            loss = loss_fn(logits.reshape(-1, vocab).float(), tgt[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    print(json.dumps({
        "system": "pytorch-" + torch.__version__, "preset": a.preset, "threads": a.threads,
        "precision": a.precision, "step_s_median": round(med, 4),
        "tgt_tokens_per_s": round(batch * tl / med, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "final_loss": round(loss.item(), 4),
    }))


if __name__ == "__main__":
    main()
