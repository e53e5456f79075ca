"""The "server-trained" reference: LoRA training of a GGUF model on prompt/completion JSONL
with PyTorch, written out as a PEFT adapter that `nightlora ... --adapter` loads.

It trains the same LoRA configuration on the same data as `nightlora train` does (same
tokenization, same supervised tokens, same batch/epochs/learning rate, AdamW with the same
defaults, global-norm clipping, constant learning rate), with torch autograd through
model.py's independent Transformer instead of nightlora's engine and host code. The data
order and the adapter's random initialisation come from torch/numpy generators, so the two
trainers are equivalent in distribution, not bit for bit: compare their adapters by what
they do (LaMP-2 accuracy), not by their bytes.

Tokenization is nightlora's own (`nightlora tokenize`), reproducing data/dataset.h for
prompt/completion lines: BOS + prompt + completion encoded once, the supervised tokens are
those after the longest common prefix with BOS + prompt alone, plus an appended EOS; lines
longer than --seq-len keep their first --seq-len tokens. The totals are printed so a caller
can check them against `nightlora train`'s own "N tokens, M supervised" line.

Run with Debian's /usr/bin/python3 (torch 1.13, numpy):
    train_lora_jsonl.py --model M.gguf --data train.jsonl --out DIR --nightlora BIN
        [--rank 8] [--alpha 16] [--targets all] [--lr 1e-3] [--epochs 3 | --iters N]
        [--batch 4] [--seed 0] [--clip 1.0] [--weight-decay 0] [--seq-len 512] [--threads N]
Writes DIR/adapter_model.safetensors + DIR/adapter_config.json and DIR/train_log.json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import read_gguf  # noqa: E402
from model import PROJ_NAMES, Transformer, load_model, nll_sum  # noqa: E402
from train_ref import proj_shape  # noqa: E402

PEFT_MODULE = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
               "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def escape(s: str) -> str:
    """`nightlora tokenize --escaped` input: one line per text."""
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def wants_bos(model_path: str) -> bool:
    """What nightlora's GGUF tokenizer loader decides (src/tokenizer/load_tokenizer_gguf.cpp)."""
    md = read_gguf(model_path).metadata
    if int(md.get("tokenizer.ggml.bos_token_id", -1)) < 0:
        return False
    default = md.get("tokenizer.ggml.model") == "llama" or md.get("tokenizer.ggml.pre") == "llama-bpe"
    return bool(md.get("tokenizer.ggml.add_bos_token", default))


def tokenize(nightlora: str, model: str, texts, bos: bool):
    args = [nightlora, "tokenize", "--model", model, "--escaped"] + (["--bos"] if bos else [])
    out = subprocess.run(args, input="".join(escape(t) + "\n" for t in texts), capture_output=True, text=True,
                         check=True).stdout
    lines = out.split("\n")[: len(texts)]
    return [[int(x) for x in line.split()] for line in lines]


def load_examples(path, nightlora, model, eos, seq_len):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                obj = json.loads(line)
                if set(obj) != {"prompt", "completion"}:
                    raise SystemExit(f"{path}:{n}: expected exactly prompt and completion")
                rows.append((obj["prompt"], obj["completion"]))
    bos = wants_bos(model)
    enc = tokenize(nightlora, model, [p for p, _ in rows] + [p + c for p, c in rows], bos)
    examples = []
    for i in range(len(rows)):
        prompt_ids, ids = enc[i], enc[len(rows) + i]
        start = 0
        while start < min(len(prompt_ids), len(ids)) and prompt_ids[start] == ids[start]:
            start += 1
        sup = [0] * start + [1] * (len(ids) - start)
        if eos >= 0:
            if ids and ids[-1] == eos:
                sup[-1] = 1
            else:
                ids = ids + [eos]
                sup = sup + [1]
        ids, sup = ids[:seq_len], sup[:seq_len]
        sup[0] = 0
        if sum(sup) == 0:
            raise SystemExit(f"{path}: example {i + 1} has no supervised token within --seq-len {seq_len}")
        examples.append((ids, sup))
    return examples


def pack(examples, idx):
    tokens, labels, seq_start = [], [], [0]
    for i in idx:
        ids, sup = examples[i]
        tokens += ids
        labels += [ids[t + 1] if sup[t + 1] else -1 for t in range(len(ids) - 1)] + [-1]
        seq_start.append(len(tokens))
    return torch.tensor(tokens, dtype=torch.long), torch.tensor(labels, dtype=torch.long), seq_start


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors:
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def to_hf_rows(B: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
    """B's rows from the GGUF llama layout (RoPE pairs (2i, 2i+1)) to Hugging Face's (i, i + hd/2)."""
    r = B.shape[1]
    return B.reshape(heads, head_dim // 2, 2, r).transpose(0, 2, 1, 3).reshape(heads * head_dim, r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nightlora", required=True, help="the nightlora executable (for its tokenizer)")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16.0)
    ap.add_argument("--targets", default="all")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    targets = list(PROJ_NAMES) if args.targets == "all" else args.targets.split(",")
    if not args.model.endswith(".gguf"):
        raise SystemExit("--model: this reference trainer reads GGUF files")

    cfg, weights = load_model(args.model, dtype=torch.float32)
    examples = load_examples(args.data, args.nightlora, args.model, cfg.eos, args.seq_len)
    n_tok = sum(len(e[0]) for e in examples)
    n_sup = sum(sum(e[1]) for e in examples)
    print(f"train: {args.data}, {len(examples)} examples, {n_tok} tokens, {n_sup} supervised", flush=True)

    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    lora, params = {}, []
    for layer in range(cfg.n_layer):
        for name in targets:
            n_in, n_out = proj_shape(cfg, name)
            bound = 1.0 / math.sqrt(n_in)  # PEFT: kaiming_uniform_(a=sqrt(5)) on A
            A = torch.empty(args.rank, n_in).uniform_(-bound, bound).requires_grad_(True)
            B = torch.zeros(n_out, args.rank, requires_grad=True)
            lora[(layer, name)] = (A, B)
            params += [A, B]
    model = Transformer(cfg, weights, lora=lora, lora_scale=args.alpha / args.rank)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)

    steps_per_epoch = math.ceil(len(examples) / args.batch)
    total = args.iters if args.iters > 0 else args.epochs * steps_per_epoch
    # A stream of shuffled epochs, read `batch` examples at a time (as nightlora's DataOrder).
    stream = []
    while len(stream) < total * args.batch:
        stream += list(rng.permutation(len(examples)))
    losses, t0 = [], time.time()
    for s in range(total):
        tokens, labels, seq_start = pack(examples, stream[s * args.batch:(s + 1) * args.batch])
        opt.zero_grad(set_to_none=True)
        loss = nll_sum(model(tokens, seq_start), labels) / float((labels >= 0).sum().item())
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        losses.append(float(loss.item()))
    elapsed = time.time() - t0
    print(f"trained {total} steps in {elapsed:.1f} s, loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    tensors, modules = [], []
    for layer in range(cfg.n_layer):
        for name in targets:
            A, B = (t.detach().numpy().astype(np.float32) for t in lora[(layer, name)])
            if cfg.rope_style == "adjacent" and name in ("q", "k"):
                B = to_hf_rows(B, cfg.n_head if name == "q" else cfg.n_kv_head, cfg.head_dim)
            base = f"base_model.model.model.layers.{layer}.{PEFT_MODULE[name]}"
            tensors += [(base + ".lora_A.weight", A), (base + ".lora_B.weight", B)]
    for name in targets:
        modules.append(PEFT_MODULE[name].split(".")[1])
    write_safetensors(os.path.join(args.out, "adapter_model.safetensors"), tensors)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": args.rank, "lora_alpha": args.alpha,
              "lora_dropout": 0.0, "target_modules": modules, "bias": "none", "fan_in_fan_out": False,
              "base_model_name_or_path": args.model, "inference_mode": True}
    with open(os.path.join(args.out, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump({"steps": total, "elapsed_s": elapsed, "losses": losses, "examples": len(examples),
                   "tokens": n_tok, "supervised": n_sup}, f)


if __name__ == "__main__":
    main()
