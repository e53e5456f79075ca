"""PyTorch side of the products benchmark: f32 dense Y = X·Wᵀ and dX = dY·W on the
projection shapes of real models, at several token counts, timed like nl_bench_products
(best of a few repetitions after a warm-up). Prints a markdown table, and with --jsonl one
JSON record per case so bench/run_products.sh can print both side by side.

Run with Debian's /usr/bin/python3; bench/run_products.sh selects the OpenMP OpenBLAS and
the thread count first. Usage:
    torch_products.py [--models qwen2.5-0.5b,...] [--tokens 128,256,512] [--projs q,down]
                      [--threads N] [--reps 3] [--min-time 0] [--budget 1.0] [--jsonl FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Shapes as in src/modelio/synth.cpp (the presets' Hugging Face config.json values):
# d_model, n_head, n_kv_head, head_dim, d_ff, vocab.
PRESETS = {
    "qwen2.5-0.5b": (896, 14, 2, 64, 4864, 151936),
    "qwen2.5-1.5b": (1536, 12, 2, 128, 8960, 151936),
    "qwen2.5-3b": (2048, 16, 2, 128, 11008, 151936),
    "qwen3-1.7b": (2048, 16, 8, 128, 6144, 151936),
    "llama-3.2-1b": (2048, 32, 8, 64, 8192, 128256),
    "llama-3.2-3b": (3072, 24, 8, 128, 8192, 128256),
}
PROJS = ("q", "k", "v", "o", "gate", "up", "down")


def distinct_shapes(model, wanted):
    """[(projs, out, in)], projections sharing a shape listed together (as nl_bench_products)."""
    d, h, kvh, hd, ff, vocab = PRESETS[model]
    shape = {"q": (h * hd, d), "k": (kvh * hd, d), "v": (kvh * hd, d), "o": (d, h * hd),
             "gate": (ff, d), "up": (ff, d), "down": (d, ff)}
    out = []
    for p in PROJS:
        if wanted and p not in wanted:
            continue
        for item in out:
            if (item[1], item[2]) == shape[p]:
                item[0] += "," + p
                break
        else:
            out.append([p, shape[p][0], shape[p][1]])
    if "head" in wanted:  # the output head only when asked for, as nl_bench_products
        out.append(["head", vocab, d])
    return out


def best_of(fn, reps, min_time, budget):
    """Best of at least reps runs after a warm-up, going on until min_time seconds have
    passed and stopping once budget seconds have (the rule of nl_bench_products)."""
    fn()
    best, spent, n = 1e300, 0.0, 0
    while (n < reps or spent < min_time) and (n == 0 or spent < budget):
        t0 = time.perf_counter()
        fn()
        s = time.perf_counter() - t0
        best, spent, n = min(best, s), spent + s, n + 1
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen2.5-0.5b,qwen2.5-1.5b,llama-3.2-1b")
    ap.add_argument("--tokens", default="128,256,512")
    ap.add_argument("--projs", default="")
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.0)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--jsonl", default="")
    a = ap.parse_args()

    threads = a.threads if a.threads > 0 else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch  # after OMP_NUM_THREADS, which OpenMP reads once

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_blas

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in PRESETS:
            raise SystemExit(f"torch_products.py: unknown model {m!r} (known: {', '.join(PRESETS)})")
    wanted = [p for p in a.projs.split(",") if p]
    for p in wanted:
        if p not in PROJS and p != "head":
            raise SystemExit(f"torch_products.py: unknown projection {p!r} (use {','.join(PROJS)},head)")
    tokens = [int(t) for t in a.tokens.split(",") if t]

    for line in torch_blas.describe(torch):
        print(line)
    print(f"square 1024 f32 matmul: {torch_blas.square_matmul_gflops(torch):.1f} GFLOP/s\n")
    print("| model | proj | out x in | T | X·Wᵀ ms | X·Wᵀ GFLOP/s | dY·W ms | dY·W GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    jf = open(a.jsonl, "w") if a.jsonl else None
    with torch.no_grad():
        for m in models:
            for projs, n_out, n_in in distinct_shapes(m, wanted):
                W = torch.randn(n_out, n_in) * 0.02
                for T in tokens:
                    X = torch.randn(T, n_in)
                    dY = torch.randn(T, n_out)
                    Y = torch.empty(T, n_out)
                    dX = torch.empty(T, n_in)
                    tf = best_of(lambda: torch.matmul(X, W.t(), out=Y), a.reps, a.min_time, a.budget)
                    tg = best_of(lambda: torch.matmul(dY, W, out=dX), a.reps, a.min_time, a.budget)
                    flop = 2.0 * T * n_in * n_out
                    print(f"| {m} | {projs} | {n_out} x {n_in} | {T} | {tf * 1e3:.2f} | {flop / tf / 1e9:.1f} | "
                          f"{tg * 1e3:.2f} | {flop / tg / 1e9:.1f} |", flush=True)
                    if jf:
                        jf.write(json.dumps({"model": m, "projs": projs, "out": n_out, "in": n_in, "T": T,
                                             "threads": threads, "fwd_s": tf, "dx_s": tg,
                                             "fwd_gflops": flop / tf / 1e9, "dx_gflops": flop / tg / 1e9}) + "\n")
                        jf.flush()
    if jf:
        jf.close()


if __name__ == "__main__":
    main()
