"""Independent PyTorch reference of the decoder models nightlora runs (llama, qwen2, qwen3).

It shares no code with the C++ engine: it reads the model files itself (Hugging Face folders
through hf_folder.py, GGUF files through gguf_reader.py, dequantized to f32) and computes
logits with plain torch ops, so the C++ inference and training code can be checked against
it. Run it with Debian's /usr/bin/python3 (torch 1.13, numpy).

API
---
Config (dataclass)
    arch ("llama" | "qwen2" | "qwen3"), n_layer, d_model, n_head, n_kv_head, head_dim, d_ff,
    vocab, rms_eps, rope_theta, rope_style ("adjacent" | "halfsplit"), rope_freq_factors
    (list of head_dim/2 divisors or None), rope_scaling (None or dict with type "llama3",
    factor, low_freq_factor, high_freq_factor, original_context), tied_output, qkv_bias,
    qk_norm, bos, eos.
    rope_style: "adjacent" rotates pairs (2i, 2i+1) (Meta layout, GGUF `llama`);
    "halfsplit" rotates (i, i + head_dim/2) (Hugging Face folders, and Qwen in GGUF).

Weights: dict name -> torch.Tensor, named as llama.cpp names GGUF tensors, matrices as
    (out_features, in_features):
    token_embd.weight, output_norm.weight, output.weight (absent when tied),
    blk.N.attn_norm.weight, blk.N.attn_q.weight, blk.N.attn_k.weight, blk.N.attn_v.weight,
    blk.N.attn_output.weight, blk.N.attn_q.bias / attn_k.bias / attn_v.bias (qwen2),
    blk.N.attn_q_norm.weight / attn_k_norm.weight (qwen3), blk.N.ffn_norm.weight,
    blk.N.ffn_gate.weight, blk.N.ffn_up.weight, blk.N.ffn_down.weight.

load_model(path, dtype=torch.float32) -> (Config, weights)
    path: a Hugging Face folder (config.json + safetensors) or a .gguf file.

Transformer(cfg, weights, lora=None, lora_scale=1.0)     (a torch.nn.Module)
    lora: dict {(layer, proj): (A, B)} with proj in PROJ_NAMES = ("q", "k", "v", "o",
    "gate", "up", "down"), A: (rank, in), B: (out, rank). Each adapted projection computes
        y = x·Wᵀ + b + lora_scale · (x·Aᵀ)·Bᵀ
    with plain torch ops, so autograd flows into A and B (make them requires_grad leaves).
    The base weights are kept as plain tensors, not parameters: they are never trained.

    forward(tokens, seq_start=None) -> logits (T, vocab)
        tokens: LongTensor (T,), several sequences packed back to back;
        seq_start: offsets [0, ..., T] of the sequences (None: one sequence). Positions
        restart at each sequence start and attention never crosses a sequence boundary.
    hidden(tokens, seq_start=None) -> final hidden states (T, d_model), after output_norm.

nll_sum(logits, labels) -> summed next-token NLL over positions whose label is >= 0.
greedy(model, prompt_ids, n) -> (generated ids, logits of the first step), recomputing the
    whole sequence each step (no KV cache: the reference stays obviously correct).
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

# The sibling readers (hf_folder, gguf_reader) are imported by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROJ_NAMES = ("q", "k", "v", "o", "gate", "up", "down")
# GGUF tensor name (within blk.N.) of each projection.
PROJ_TENSOR = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "o": "attn_output",
    "gate": "ffn_gate",
    "up": "ffn_up",
    "down": "ffn_down",
}


@dataclass
class Config:
    arch: str = "llama"
    n_layer: int = 0
    d_model: int = 0
    n_head: int = 0
    n_kv_head: int = 0
    head_dim: int = 0
    d_ff: int = 0
    vocab: int = 0
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_style: str = "adjacent"
    rope_freq_factors: Optional[List[float]] = None
    rope_scaling: Optional[dict] = None
    tied_output: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    bos: int = -1
    eos: int = -1
    extra: dict = field(default_factory=dict)


def rope_inv_freq(cfg: Config) -> torch.Tensor:
    """Per-pair angular frequencies (head_dim/2 values), float64, incl. frequency scaling."""
    half = cfg.head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = cfg.rope_theta ** (-2.0 * i / cfg.head_dim)
    if cfg.rope_freq_factors is not None:
        # llama.cpp's rope_freqs.weight: divisors of the frequencies.
        inv = inv / torch.tensor(cfg.rope_freq_factors, dtype=torch.float64)
    elif cfg.rope_scaling and cfg.rope_scaling.get("type") == "llama3":
        # Hugging Face's _compute_llama3_parameters.
        s = cfg.rope_scaling
        factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_context"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def apply_rope(x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor, style: str) -> torch.Tensor:
    """x: (T, heads, head_dim); pos: (T,) positions. Rotates each pair by pos * inv_freq[i]."""
    ang = pos.to(torch.float64)[:, None] * inv_freq[None, :]  # (T, half)
    cos = torch.cos(ang).to(x.dtype)[:, None, :]
    sin = torch.sin(ang).to(x.dtype)[:, None, :]
    half = x.shape[-1] // 2
    if style == "adjacent":
        a, b = x[..., 0::2], x[..., 1::2]
        ra, rb = a * cos - b * sin, a * sin + b * cos
        return torch.stack((ra, rb), dim=-1).reshape(x.shape)
    if style == "halfsplit":
        a, b = x[..., :half], x[..., half:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    raise ValueError(f"unknown rope style {style!r}")


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def positions_and_mask(T: int, seq_start: Optional[List[int]], device=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Positions restarting per sequence, and a (T, T) boolean mask: True where query t may
    attend to key s (same sequence, s <= t)."""
    if seq_start is None:
        seq_start = [0, T]
    seq_start = [int(s) for s in seq_start]
    if seq_start[0] != 0 or seq_start[-1] != T or any(b < a for a, b in zip(seq_start, seq_start[1:])):
        raise ValueError(f"bad seq_start {seq_start} for {T} tokens")
    seq_id = torch.empty(T, dtype=torch.long)
    pos = torch.empty(T, dtype=torch.long)
    for k, (a, b) in enumerate(zip(seq_start, seq_start[1:])):
        seq_id[a:b] = k
        pos[a:b] = torch.arange(b - a)
    idx = torch.arange(T)
    mask = (seq_id[:, None] == seq_id[None, :]) & (idx[None, :] <= idx[:, None])
    return pos.to(device), mask.to(device)


class Transformer(torch.nn.Module):
    def __init__(self, cfg: Config, weights: Dict[str, torch.Tensor], lora=None, lora_scale: float = 1.0):
        super().__init__()
        self.cfg = cfg
        self.w = dict(weights)
        if "output.weight" not in self.w:
            self.w["output.weight"] = self.w["token_embd.weight"]
        self.lora = lora or {}
        self.lora_scale = lora_scale
        self._check_shapes()

    def _check_shapes(self):
        c = self.cfg
        exp = {
            "token_embd.weight": (c.vocab, c.d_model),
            "output_norm.weight": (c.d_model,),
            "output.weight": (c.vocab, c.d_model),
        }
        for l in range(c.n_layer):
            p = f"blk.{l}."
            exp[p + "attn_norm.weight"] = (c.d_model,)
            exp[p + "attn_q.weight"] = (c.n_head * c.head_dim, c.d_model)
            exp[p + "attn_k.weight"] = (c.n_kv_head * c.head_dim, c.d_model)
            exp[p + "attn_v.weight"] = (c.n_kv_head * c.head_dim, c.d_model)
            exp[p + "attn_output.weight"] = (c.d_model, c.n_head * c.head_dim)
            exp[p + "ffn_norm.weight"] = (c.d_model,)
            exp[p + "ffn_gate.weight"] = (c.d_ff, c.d_model)
            exp[p + "ffn_up.weight"] = (c.d_ff, c.d_model)
            exp[p + "ffn_down.weight"] = (c.d_model, c.d_ff)
            if c.qkv_bias:
                exp[p + "attn_q.bias"] = (c.n_head * c.head_dim,)
                exp[p + "attn_k.bias"] = (c.n_kv_head * c.head_dim,)
                exp[p + "attn_v.bias"] = (c.n_kv_head * c.head_dim,)
            if c.qk_norm:
                exp[p + "attn_q_norm.weight"] = (c.head_dim,)
                exp[p + "attn_k_norm.weight"] = (c.head_dim,)
        for name, shape in exp.items():
            if name not in self.w:
                raise ValueError(f"missing weight {name}")
            if tuple(self.w[name].shape) != shape:
                raise ValueError(f"{name}: expected shape {shape}, found {tuple(self.w[name].shape)}")

    def proj(self, layer: int, name: str, x: torch.Tensor) -> torch.Tensor:
        """x·Wᵀ + b + scale·(x·Aᵀ)·Bᵀ for projection `name` of `layer`."""
        base = f"blk.{layer}.{PROJ_TENSOR[name]}"
        y = x @ self.w[base + ".weight"].t()
        bias = self.w.get(base + ".bias")
        if bias is not None:
            y = y + bias
        ab = self.lora.get((layer, name))
        if ab is not None:
            A, B = ab
            y = y + self.lora_scale * ((x @ A.t()) @ B.t())
        return y

    def block(self, l: int, x: torch.Tensor, pos, mask, inv_freq) -> torch.Tensor:
        """One decoder block on the residual stream x [T, d] (positions, mask and RoPE
        frequencies from positions_and_mask / rope_inv_freq)."""
        c, T = self.cfg, x.shape[0]
        group = c.n_head // c.n_kv_head
        p = f"blk.{l}."
        h = rms_norm(x, self.w[p + "attn_norm.weight"], c.rms_eps)
        q = self.proj(l, "q", h).view(T, c.n_head, c.head_dim)
        k = self.proj(l, "k", h).view(T, c.n_kv_head, c.head_dim)
        v = self.proj(l, "v", h).view(T, c.n_kv_head, c.head_dim)
        if c.qk_norm:
            q = rms_norm(q, self.w[p + "attn_q_norm.weight"], c.rms_eps)
            k = rms_norm(k, self.w[p + "attn_k_norm.weight"], c.rms_eps)
        q = apply_rope(q, pos, inv_freq, c.rope_style)
        k = apply_rope(k, pos, inv_freq, c.rope_style)
        # GQA: query head j reads key/value head j // group.
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(c.head_dim)
        scores = scores.masked_fill(~mask[None, :, :], float("-inf"))
        att = torch.softmax(scores, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, c.n_head * c.head_dim)
        x = x + self.proj(l, "o", o)
        h = rms_norm(x, self.w[p + "ffn_norm.weight"], c.rms_eps)
        g = self.proj(l, "gate", h)
        u = self.proj(l, "up", h)
        x = x + self.proj(l, "down", torch.nn.functional.silu(g) * u)
        return x

    def hidden(self, tokens: torch.Tensor, seq_start=None) -> torch.Tensor:
        c = self.cfg
        T = tokens.shape[0]
        pos, mask = positions_and_mask(T, seq_start)
        inv_freq = rope_inv_freq(c)
        x = self.w["token_embd.weight"][tokens]
        for l in range(c.n_layer):
            x = self.block(l, x, pos, mask, inv_freq)
        return rms_norm(x, self.w["output_norm.weight"], c.rms_eps)

    def forward(self, tokens: torch.Tensor, seq_start=None) -> torch.Tensor:
        return self.hidden(tokens, seq_start) @ self.w["output.weight"].t()


def nll_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Sum of -log p(label) over positions with label >= 0."""
    sel = labels >= 0
    logp = torch.log_softmax(logits[sel], dim=-1)
    return -logp.gather(1, labels[sel][:, None]).sum()


def greedy(model: Transformer, prompt_ids: List[int], n: int, stop_ids=()) -> Tuple[List[int], torch.Tensor]:
    ids = list(prompt_ids)
    out: List[int] = []
    first_logits = None
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor(ids, dtype=torch.long))[-1]
            if first_logits is None:
                first_logits = logits.clone()
            nxt = int(torch.argmax(logits))
            if nxt in stop_ids:
                break
            out.append(nxt)
            ids.append(nxt)
    return out, first_logits


def load_model(path: str, dtype=torch.float32):
    """(Config, weights) from a Hugging Face folder or a GGUF file, weights as `dtype`."""
    if os.path.isdir(path):
        from hf_folder import load_hf
        cfg, w = load_hf(path)
    else:
        from gguf_reader import load_gguf_model
        cfg, w = load_gguf_model(path)
    return cfg, {k: torch.from_numpy(v).to(dtype) for k, v in w.items()}
