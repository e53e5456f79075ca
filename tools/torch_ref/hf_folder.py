"""Reads a Hugging Face model folder (config.json + model.safetensors, or shards listed in
model.safetensors.index.json) into numpy arrays, independently of the C++ reader.

load_hf(dir) -> (model.Config, {gguf-style name: np.ndarray float32})
    Tensors are renamed to llama.cpp's GGUF names (see model.py) but NOT permuted: the rows
    of Q and K stay in Hugging Face's layout, so the config says rope_style="halfsplit".
    A tied model whose file stores only lm_head.weight (or only embed_tokens) gets
    token_embd.weight from whichever is present, and no output.weight.
read_safetensors(path) -> ({name: np.ndarray (as stored dtype, f16/bf16 -> float32)}, metadata)
"""
from __future__ import annotations

import json
import os
import struct
from typing import Dict, Tuple

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], dict]:
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        buf = raw[base + a : base + b]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        if dt == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif dt in _DTYPES:
            arr = np.frombuffer(buf, dtype=np.dtype(_DTYPES[dt]).newbyteorder("<")).astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        out[name] = arr.reshape(shape)
    return out, meta


def _hf_to_gguf_name(name: str) -> str:
    fixed = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if name in fixed:
        return fixed[name]
    parts = name.split(".")
    if parts[:2] != ["model", "layers"]:
        return name
    layer = parts[2]
    rest = ".".join(parts[3:])
    table = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    if rest not in table:
        return name
    return f"blk.{layer}.{table[rest]}"


def config_from_hf(c: dict):
    from model import Config

    archs = c.get("architectures") or []
    arch = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}.get(
        archs[0] if archs else "", c.get("model_type", "llama")
    )
    n_head = c["num_attention_heads"]
    d = c["hidden_size"]
    head_dim = c.get("head_dim") or d // n_head
    rs = c.get("rope_scaling")
    scaling = None
    if rs and (rs.get("rope_type") or rs.get("type")) == "llama3":
        scaling = {
            "type": "llama3",
            "factor": float(rs["factor"]),
            "low_freq_factor": float(rs["low_freq_factor"]),
            "high_freq_factor": float(rs["high_freq_factor"]),
            "original_context": int(rs["original_max_position_embeddings"]),
        }
    bos = c.get("bos_token_id")
    eos = c.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0]
    return Config(
        arch=arch,
        n_layer=c["num_hidden_layers"],
        d_model=d,
        n_head=n_head,
        n_kv_head=c.get("num_key_value_heads", n_head),
        head_dim=head_dim,
        d_ff=c["intermediate_size"],
        vocab=c["vocab_size"],
        rms_eps=float(c.get("rms_norm_eps", 1e-6)),
        rope_theta=float(c.get("rope_theta", 10000.0)),
        rope_style="halfsplit",
        rope_scaling=scaling,
        tied_output=bool(c.get("tie_word_embeddings", False)),
        qkv_bias=arch == "qwen2" or bool(c.get("attention_bias", False)),
        qk_norm=arch == "qwen3",
        bos=-1 if bos is None else int(bos),
        eos=-1 if eos is None else int(eos),
    )


def load_hf(folder: str):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = config_from_hf(json.load(f))
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    raw: Dict[str, np.ndarray] = {}
    for fn in files:
        t, _ = read_safetensors(os.path.join(folder, fn))
        raw.update(t)
    w = {_hf_to_gguf_name(k): v for k, v in raw.items()}
    if "token_embd.weight" not in w and "output.weight" in w:
        w["token_embd.weight"] = w["output.weight"]
    if cfg.tied_output:
        w.pop("output.weight", None)
    return cfg, w
