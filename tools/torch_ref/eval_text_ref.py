#!/usr/bin/python3
"""Perplexity of a token sequence in strided windows, with the independent PyTorch reference
(model.py): the check of `nightlora eval --text`.

usage: eval_text_ref.py MODEL IDS.json --seq-len N --stride S [--dtype float32|float64]
       eval_text_ref.py --jobs JOBS.json [--dtype ...]

MODEL is a Hugging Face folder or a GGUF file; IDS.json is the text's token ids (a JSON list,
BOS included when the tokenizer adds one). The windows are Hugging Face's strided
evaluation loop (the "Perplexity of fixed-length models" guide), written here on its own:

    prev_end = 0
    for begin in range(0, len(ids), stride):
        end = min(begin + seq_len, len(ids))
        target_len = end - prev_end            # only the tokens no earlier window scored
        labels = ids[begin:end]; labels[:-target_len] = -100
        loss over the window (the model shifts labels: a window's first token is never scored)
        prev_end = end
        if end == len(ids): break

Each window runs through the model alone.
Prints JSON: {"nll_sum", "scored_tokens", "windows", "loss", "perplexity"}. With --jobs,
JOBS.json is a list of {"model", "ids" (list), "seq_len", "stride"} run in one process (torch
starts once), and the output is {"runs": [one result per job, in order]}.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Transformer, load_model, nll_sum  # noqa: E402


_models = {}


def strided_loss(model_path, ids, seq_len, stride, dtype):
    key = (model_path, dtype)
    if key not in _models:
        cfg, w = load_model(model_path, dtype)
        _models[key] = Transformer(cfg, w)
    model = _models[key]
    total, scored, windows, prev_end = 0.0, 0, 0, 0
    with torch.no_grad():
        for begin in range(0, len(ids), stride):
            end = min(begin + seq_len, len(ids))
            target_len = end - prev_end  # the tokens no earlier window scored
            tokens = torch.tensor(ids[begin:end], dtype=torch.long)
            # labels[i] is the token that position i predicts (the next one); -100 = not scored.
            labels = torch.full_like(tokens, -100)
            labels[:-1] = tokens[1:]
            first_scored = (end - begin) - target_len  # index in the window of the first new token
            labels[: max(first_scored - 1, 0)] = -100
            logits = model(tokens).to(dtype)
            total += float(nll_sum(logits, labels))
            scored += int((labels >= 0).sum())
            windows += 1
            prev_end = end
            if end == len(ids):
                break
    loss = total / scored
    return {"nll_sum": total, "scored_tokens": scored, "windows": windows, "loss": loss, "perplexity": math.exp(loss)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("ids", nargs="?")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--stride", type=int)
    ap.add_argument("--jobs")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    if a.jobs:
        with open(a.jobs) as f:
            jobs = json.load(f)
        runs = [strided_loss(j["model"], j["ids"], j["seq_len"], j["stride"], dtype) for j in jobs]
        print(json.dumps({"runs": runs}))
        return
    if not (a.model and a.ids and a.seq_len and a.stride):
        ap.error("give MODEL IDS.json --seq-len N --stride S, or --jobs JOBS.json")
    with open(a.ids) as f:
        ids = json.load(f)
    print(json.dumps(strided_loss(a.model, ids, a.seq_len, a.stride, dtype)))


if __name__ == "__main__":
    main()
