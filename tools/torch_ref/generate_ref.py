#!/usr/bin/python3
"""Greedy generation with the independent PyTorch reference (model.py), for parity tests.

usage: generate_ref.py MODEL [--ids "1 2 3"] [-n N] [--stop "2 1"] [--dtype float32|float64]
                       [--out FILE] [--logit-steps K]
       generate_ref.py --jobs JOBS.json [--dtype ...] [--out FILE]

MODEL is a Hugging Face folder or a GGUF file. The prompt is given as token ids (default:
the model's BOS); generation is greedy (argmax, lowest id among ties) for up to N tokens
and ends without emitting it when a --stop id is produced (default stop ids: the model's
BOS and EOS). Writes JSON (to --out, or stdout): {"prompt_ids", "ids" (new tokens),
"stopped_on_token", "step_logits": the logits each of the first K new tokens was chosen
from (teacher-forced in one pass), "config"}.
With --jobs, JOBS.json is a list of {"model", "ids" (list), "n", "stop" (list, optional),
"logit_steps" (optional)} run in one process (torch starts once), and the output is
{"runs": [one result per job, in order]}.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Transformer, load_model  # noqa: E402


_models = {}


def run(model_path, prompt, n, stop, dtype, logit_steps):
    key = (model_path, dtype)
    if key not in _models:
        cfg, w = load_model(model_path, dtype)
        _models[key] = (cfg, Transformer(cfg, w))
    cfg, m = _models[key]
    prompt = list(prompt) or [cfg.bos]
    if stop is None:
        stop = [i for i in (cfg.bos, cfg.eos) if i >= 0]
    ids = list(prompt)
    new = []
    stopped = False
    with torch.no_grad():
        for _ in range(n):
            nxt = int(torch.argmax(m(torch.tensor(ids, dtype=torch.long))[-1]))
            if nxt in stop:
                stopped = True
                break
            new.append(nxt)
            ids.append(nxt)
        k = len(new) if logit_steps < 0 else min(logit_steps, len(new))
        step_logits = []
        if k > 0:
            all_logits = m(torch.tensor(prompt + new[: k - 1], dtype=torch.long))
            step_logits = all_logits[len(prompt) - 1 :].tolist()
    return {
        "model": model_path,
        "prompt_ids": prompt,
        "ids": new,
        "stopped_on_token": stopped,
        "step_logits": step_logits,
        "config": {k: v for k, v in vars(cfg).items() if k != "rope_freq_factors"},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--jobs", default="")
    ap.add_argument("--ids", default="")
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--stop", default=None, help="stop ids (default: the model's BOS and EOS)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--out", default="")
    ap.add_argument("--logit-steps", type=int, default=-1, help="steps whose logits to write (-1: all)")
    a = ap.parse_args()

    torch.set_num_threads(1)
    dtype = getattr(torch, a.dtype)
    if a.jobs:
        with open(a.jobs) as f:
            jobs = json.load(f)
        out = {
            "runs": [
                run(j["model"], j.get("ids", []), j.get("n", 100), j.get("stop"), dtype, j.get("logit_steps", -1))
                for j in jobs
            ]
        }
    else:
        if not a.model:
            ap.error("give MODEL or --jobs")
        stop = [int(x) for x in a.stop.split()] if a.stop is not None else None
        out = run(a.model, [int(x) for x in a.ids.split()], a.n, stop, dtype, a.logit_steps)
    text = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
