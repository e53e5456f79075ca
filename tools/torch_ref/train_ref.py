"""Independent PyTorch reference trainer for nightlora's LoRA step (torch autograd).

It reads the same GGUF model (dequantized by gguf_reader.py, through model.py), the same
packed batch and the same initial adapter as the C++ step, and computes the summed
next-token NLL over supervised positions, every adapter gradient, and optionally N steps
of torch.optim.AdamW. Run it with Debian's /usr/bin/python3 (torch 1.13, numpy).

Usage
-----
    train_ref.py --model M.gguf --batch batch.json --adapter adapter.f32 --out DIR
                 [--dtype f64|f32] [--steps N --lr LR --beta1 B1 --beta2 B2 --eps E
                  --weight-decay WD [--max-grad-norm C]]
    train_ref.py --jobs jobs.json
        jobs.json: a list of objects with the same keys (model, batch, adapter, out, and
        optionally dtype, steps, lr, beta1, beta2, eps, weight_decay, max_grad_norm), run
        in one process so torch is imported once.

batch.json
    {"tokens": [...], "labels": [...], "seq_start": [0, ..., T],
     "rank": r, "alpha": a, "loss_scale": s,
     "pairs": [[layer, "q"], [layer, "k"], ...]}
    labels[t] is the token position t predicts, or -1 (not supervised). `pairs` lists the
    adapted projections in the order their tensors appear in adapter.f32.
adapter.f32
    Raw little-endian float32: for each pair in order, A (rank x in, row-major) then
    B (out x rank).

Output (in DIR)
    result.json  {"loss_sum": L, "n_supervised": n, "step_losses": [...]}
                 loss_sum is the summed NLL of the initial adapter; step_losses the summed
                 NLL before each AdamW step.
    grads.f64    d(loss_scale * loss_sum)/d(adapter) of the initial adapter, float64, in
                 the adapter.f32 order.
    final.f64    the adapter after N AdamW steps (only with --steps N > 0), float64.

AdamW: each step computes loss_scale * loss_sum on the same batch, optionally clips the
global gradient norm to --max-grad-norm (torch.nn.utils.clip_grad_norm_), and calls
torch.optim.AdamW(lr, betas, eps, weight_decay) with a constant learning rate.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import PROJ_NAMES, Transformer, load_model, nll_sum  # noqa: E402


def proj_shape(cfg, name):
    """(in, out) of a projection, as nightlora's proj_shape."""
    q_dim, kv_dim = cfg.n_head * cfg.head_dim, cfg.n_kv_head * cfg.head_dim
    return {
        "q": (cfg.d_model, q_dim),
        "k": (cfg.d_model, kv_dim),
        "v": (cfg.d_model, kv_dim),
        "o": (q_dim, cfg.d_model),
        "gate": (cfg.d_model, cfg.d_ff),
        "up": (cfg.d_model, cfg.d_ff),
        "down": (cfg.d_ff, cfg.d_model),
    }[name]


DEFAULTS = {"dtype": "f64", "steps": 0, "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
            "weight_decay": 0.0, "max_grad_norm": 0.0}


def run_job(args):
    dtype = torch.float64 if args.dtype == "f64" else torch.float32
    cfg, weights = load_model(args.model, dtype=dtype)
    with open(args.batch) as f:
        b = json.load(f)
    rank = int(b["rank"])
    scale = float(b["alpha"]) / rank
    loss_scale = float(b.get("loss_scale", 1.0))
    tokens = torch.tensor(b["tokens"], dtype=torch.long)
    labels = torch.tensor(b["labels"], dtype=torch.long)
    seq_start = [int(s) for s in b["seq_start"]]

    flat = np.fromfile(args.adapter, dtype="<f4")
    params = []  # in file order: A, B of each pair
    lora = {}
    off = 0
    for layer, name in b["pairs"]:
        if name not in PROJ_NAMES:
            raise SystemExit(f"unknown projection {name!r}")
        n_in, n_out = proj_shape(cfg, name)
        tensors = []
        for shape in ((rank, n_in), (n_out, rank)):
            n = shape[0] * shape[1]
            if off + n > flat.size:
                raise SystemExit(f"{args.adapter}: too short for pair ({layer}, {name})")
            t = torch.tensor(flat[off:off + n].astype(np.float64), dtype=dtype).reshape(shape)
            t.requires_grad_(True)
            tensors.append(t)
            off += n
        lora[(int(layer), name)] = tuple(tensors)
        params.extend(tensors)
    if off != flat.size:
        raise SystemExit(f"{args.adapter}: {flat.size - off} floats left over")

    model = Transformer(cfg, weights, lora=lora, lora_scale=scale)

    def loss_sum():
        return nll_sum(model(tokens, seq_start), labels)

    os.makedirs(args.out, exist_ok=True)
    loss = loss_sum()
    (loss * loss_scale).backward()
    grads = np.concatenate([p.grad.detach().to(torch.float64).reshape(-1).numpy() for p in params])
    grads.astype("<f8").tofile(os.path.join(args.out, "grads.f64"))
    result = {"loss_sum": float(loss.item()), "n_supervised": int((labels >= 0).sum().item()), "step_losses": []}

    if args.steps > 0:
        opt = torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                                weight_decay=args.weight_decay)
        for p in params:
            p.grad = None
        for _ in range(args.steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_sum()
            result["step_losses"].append(float(loss.item()))
            (loss * loss_scale).backward()
            if args.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            opt.step()
        final = np.concatenate([p.detach().to(torch.float64).reshape(-1).numpy() for p in params])
        final.astype("<f8").tofile(os.path.join(args.out, "final.f64"))

    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs")
    ap.add_argument("--model")
    ap.add_argument("--batch")
    ap.add_argument("--adapter")
    ap.add_argument("--out")
    ap.add_argument("--dtype", choices=["f64", "f32"], default=DEFAULTS["dtype"])
    ap.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    ap.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    ap.add_argument("--beta1", type=float, default=DEFAULTS["beta1"])
    ap.add_argument("--beta2", type=float, default=DEFAULTS["beta2"])
    ap.add_argument("--eps", type=float, default=DEFAULTS["eps"])
    ap.add_argument("--weight-decay", type=float, default=DEFAULTS["weight_decay"])
    ap.add_argument("--max-grad-norm", type=float, default=DEFAULTS["max_grad_norm"])
    args = ap.parse_args()
    if args.jobs:
        with open(args.jobs) as f:
            jobs = json.load(f)
        failed = 0
        for job in jobs:
            unknown = set(job) - set(DEFAULTS) - {"model", "batch", "adapter", "out"}
            if unknown:
                raise SystemExit(f"{args.jobs}: unknown keys {sorted(unknown)}")
            try:
                run_job(argparse.Namespace(**{**DEFAULTS, **job}))
            except (Exception, SystemExit) as e:  # one bad job must not hide the others' results
                failed += 1
                print(f"job {job.get('out')}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1 if failed else 0)
    for k in ("model", "batch", "adapter", "out"):
        if getattr(args, k) is None:
            ap.error(f"--{k} is required (or --jobs)")
    run_job(args)


if __name__ == "__main__":
    main()
