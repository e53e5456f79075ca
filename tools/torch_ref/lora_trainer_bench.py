"""PyTorch LoRA trainer baseline (issue 5): what a CPU user would run with PyTorch, timed.

f32 dense base weights (a GGUF file dequantized by gguf_reader.py, through model.py), LoRA
adapters on the chosen projections (PEFT init: A Kaiming-uniform, B zero), one random
sequence of --seq tokens per step, mean next-token cross-entropy, torch autograd backward
and torch.optim.AdamW. Optionally checkpoints every decoder block
(torch.utils.checkpoint, non-reentrant) and, with --loss completion, supervises only the
second half of the sequence and runs the output head only on those positions (the best a
PyTorch user can do for prompt/completion data).
Prints tokens/s over the timed steps (after one untimed warm-up step) and the peak RSS of
the process (ru_maxrss: includes loading the model). Run one configuration per process so
the peak RSS is that configuration's; bench/run_step.sh runs them all side by side with
nightlora's step.

Run with Debian's /usr/bin/python3 (torch 1.13). bench/run_step.sh selects the OpenMP
OpenBLAS and OMP_NUM_THREADS first. Usage:
    lora_trainer_bench.py --model M.gguf [--seq 256] [--rank 8] [--targets all]
        [--loss all|completion] [--checkpointing on|off] [--steps 3] [--threads N]
        [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def reset_peak_rss() -> bool:
    """Resets the kernel's VmHWM (Linux >= 4.0), so training's own peak can be read apart
    from the loader's (which dequantizes to f32 through numpy temporaries)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def vm_hwm_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--targets", default="all", help="q,k,v,o,gate,up,down or all")
    ap.add_argument("--loss", choices=("all", "completion"), default="all")
    ap.add_argument("--checkpointing", choices=("on", "off"), default="off")
    ap.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.seq < 2 or a.rank < 1 or a.steps < 1:
        raise SystemExit("lora_trainer_bench.py: --seq must be >= 2, --rank and --steps >= 1")

    threads = a.threads if a.threads > 0 else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch  # after OMP_NUM_THREADS, which OpenMP reads once
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "bench"))
    from model import PROJ_NAMES, Transformer, load_model, positions_and_mask, rms_norm, rope_inv_freq
    import torch_blas

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    for line in torch_blas.describe(torch):
        print(line)

    targets = PROJ_NAMES if a.targets == "all" else tuple(t for t in a.targets.split(",") if t)
    for t in targets:
        if t not in PROJ_NAMES:
            raise SystemExit(f"lora_trainer_bench.py: unknown target {t!r} (use {','.join(PROJ_NAMES)} or all)")

    t_load = time.perf_counter()
    cfg, weights = load_model(a.model, dtype=torch.float32)
    load_s = time.perf_counter() - t_load
    q_dim, kv_dim = cfg.n_head * cfg.head_dim, cfg.n_kv_head * cfg.head_dim
    shapes = {"q": (cfg.d_model, q_dim), "k": (cfg.d_model, kv_dim), "v": (cfg.d_model, kv_dim),
              "o": (q_dim, cfg.d_model), "gate": (cfg.d_model, cfg.d_ff), "up": (cfg.d_model, cfg.d_ff),
              "down": (cfg.d_ff, cfg.d_model)}
    lora, params = {}, []
    for layer in range(cfg.n_layer):
        for name in targets:
            n_in, n_out = shapes[name]
            A = torch.empty(a.rank, n_in).uniform_(-1 / math.sqrt(n_in), 1 / math.sqrt(n_in)).requires_grad_(True)
            B = torch.zeros(n_out, a.rank, requires_grad=True)
            lora[(layer, name)] = (A, B)
            params += [A, B]
    model = Transformer(cfg, weights, lora=lora, lora_scale=2.0)  # alpha = 2 * rank
    opt = torch.optim.AdamW(params, lr=1e-4)

    T = a.seq
    tokens = torch.randint(0, cfg.vocab, (T,), generator=torch.Generator().manual_seed(1234))
    labels = torch.full((T,), -1, dtype=torch.long)
    first = T // 2 if a.loss == "completion" else 0
    labels[first:T - 1] = tokens[first + 1:T]
    supervised = (labels >= 0).nonzero().squeeze(1)
    pos, mask = positions_and_mask(T, None)
    inv_freq = rope_inv_freq(cfg)

    # One decoder block (model.py's), as a function so torch.utils.checkpoint can
    # recompute it in backward.
    def block(layer, x):
        return model.block(layer, x, pos, mask, inv_freq)

    def loss_fn():
        x = model.w["token_embd.weight"][tokens]
        for layer in range(cfg.n_layer):
            if a.checkpointing == "on":
                x = checkpoint(block, layer, x, use_reentrant=False)
            else:
                x = block(layer, x)
        h = rms_norm(x, model.w["output_norm.weight"], cfg.rms_eps)[supervised]  # head on supervised rows only
        return F.cross_entropy(h @ model.w["output.weight"].t(), labels[supervised])

    # Resetting VmHWM also resets ru_maxrss, so the loading peak is read first.
    load_rss = peak_rss_mib()
    hwm_reset = reset_peak_rss()
    timed = 0.0
    for i in range(a.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        s = time.perf_counter() - t0
        if i > 0:
            timed += s
        print(f"step {i}: {s:.2f} s, loss {loss.item():.4f}" + (" (warm-up, not timed)" if i == 0 else ""),
              file=sys.stderr, flush=True)
    tok_s = T * a.steps / timed
    train_rss = vm_hwm_mib() if hwm_reset else float("nan")
    rss = max(load_rss, peak_rss_mib())
    print(f"model: {a.model} ({cfg.n_layer} layers, d_model {cfg.d_model})")
    print(f"seq {T}, rank {a.rank}, targets {','.join(targets)}, loss on {a.loss} ({supervised.numel()} supervised), "
          f"checkpointing {a.checkpointing}, threads {torch.get_num_threads()}, {a.steps} timed steps")
    print(f"load {load_s:.1f} s; step {timed / a.steps:.2f} s; {tok_s:.1f} tokens/s; peak RSS {rss:.0f} MiB "
          f"(while training: {train_rss:.0f} MiB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"trainer": "pytorch", "seq": T, "rank": a.rank, "loss": a.loss,
                       "checkpointing": a.checkpointing, "threads": torch.get_num_threads(), "steps": a.steps,
                       "step_s": timed / a.steps, "tokens_per_s": tok_s, "peak_rss_mib": rss, "train_peak_rss_mib": train_rss,
                       "blas": torch_blas.blas_kind(torch_blas.loaded_blas_libraries())}, f)
            f.write("\n")


if __name__ == "__main__":
    main()
