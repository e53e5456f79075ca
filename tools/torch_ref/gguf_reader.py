"""A small numpy GGUF (v2/v3) reader with dequantizers, written independently of the C++
reader so it can serve as a reference for it.

read_gguf(path) -> GgufFile with .version, .metadata (dict key -> value; arrays as lists),
    .tensors (dict name -> TensorInfo(name, ne, type, offset, data: bytes view)).
dequantize(info) -> np.ndarray float32 with shape reversed(ne) (slowest-first, i.e. a
    matrix comes out as (rows, cols) = (out, in)).
load_gguf_model(path) -> (model.Config, {name: np.ndarray float32}) for llama/qwen2/qwen3.

Dequantized types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

QK_K = 256

# ggml type id -> (name, block size, block bytes)
TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    30: ("BF16", 1, 2),
}

# metadata value type id -> struct format (scalars)
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


@dataclass
class TensorInfo:
    name: str
    ne: List[int]
    type: int
    offset: int
    data: memoryview = None

    @property
    def type_name(self) -> str:
        return TYPES.get(self.type, (f"type{self.type}",))[0]


class GgufFile:
    def __init__(self, path: str):
        with open(path, "rb") as f:
            self.raw = f.read()
        self.path = path
        self.pos = 0
        if self._take(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (bad magic)")
        self.version = self._u("<I")
        if self.version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = self._u("<Q")
        n_kv = self._u("<Q")
        self.metadata: Dict[str, object] = {}
        for _ in range(n_kv):
            key = self._str()
            self.metadata[key] = self._value(self._u("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            nd = self._u("<I")
            ne = [self._u("<Q") for _ in range(nd)]
            t = self._u("<I")
            off = self._u("<Q")
            infos.append(TensorInfo(name, ne, t, off))
        align = int(self.metadata.get("general.alignment", 32))
        base = (self.pos + align - 1) // align * align
        self.data_offset = base
        self.tensors: Dict[str, TensorInfo] = {}
        mv = memoryview(self.raw)
        for ti in infos:
            if ti.type not in TYPES:
                raise ValueError(f"{path}: tensor {ti.name}: unsupported type id {ti.type}")
            _, bs, bb = TYPES[ti.type]
            n = int(np.prod(ti.ne)) if ti.ne else 1
            nbytes = n // bs * bb
            ti.data = mv[base + ti.offset : base + ti.offset + nbytes]
            if len(ti.data) != nbytes:
                raise ValueError(f"{path}: tensor {ti.name} runs past the end of the file")
            self.tensors[ti.name] = ti

    def _take(self, n: int) -> bytes:
        b = self.raw[self.pos : self.pos + n]
        if len(b) != n:
            raise ValueError(f"{self.path}: truncated at byte {self.pos}")
        self.pos += n
        return b

    def _u(self, fmt: str):
        (v,) = struct.unpack(fmt, self._take(struct.calcsize(fmt)))
        return v

    def _str(self) -> str:
        n = self._u("<Q")
        return self._take(n).decode("utf-8", errors="replace")

    def _value(self, t: int):
        if t in _SCALAR:
            return self._u(_SCALAR[t])
        if t == 8:
            return self._str()
        if t == 9:
            et = self._u("<I")
            n = self._u("<Q")
            if et in _SCALAR:
                fmt = _SCALAR[et]
                size = struct.calcsize(fmt)
                arr = np.frombuffer(self._take(size * n), dtype=np.dtype(fmt))
                return arr.tolist()
            return [self._value(et) for _ in range(n)]
        raise ValueError(f"{self.path}: unknown metadata type {t} at byte {self.pos}")


def read_gguf(path: str) -> GgufFile:
    return GgufFile(path)


def _f16(b: np.ndarray) -> np.ndarray:
    """Little-endian f16 from a (..., 2) uint8 array, as float32 (...)."""
    return b.copy().view("<f2")[..., 0].astype(np.float32)


def _blocks(data, bb: int) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, bb)


def _scale_min_k4(sc: np.ndarray):
    """The 8 (scale, min) 6-bit pairs of Q4_K/Q5_K from the 12 packed bytes; sc: (nb, 12)."""
    sc = sc.astype(np.uint16)
    d = np.empty((sc.shape[0], 8), dtype=np.uint16)
    m = np.empty_like(d)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d.astype(np.float32), m.astype(np.float32)


def dequantize_bytes(type_id: int, data, n: int) -> np.ndarray:
    """n elements of type `type_id` from `data`, as a flat float32 array."""
    name, bs, bb = TYPES[type_id]
    if name == "F32":
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    if name == "F16":
        return np.frombuffer(data, dtype="<f2").astype(np.float32)
    if name == "BF16":
        return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    b = _blocks(data, bb)
    if name == "Q8_0":
        d = _f16(b[:, 0:2])
        q = b[:, 2:].view(np.int8).astype(np.float32)
        return (d[:, None] * q).reshape(-1)
    if name in ("Q4_0", "Q4_1"):
        d = _f16(b[:, 0:2])
        qs = b[:, 2:18] if name == "Q4_0" else b[:, 4:20]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)
        if name == "Q4_0":
            return (d[:, None] * (q - 8)).reshape(-1)
        m = _f16(b[:, 2:4])
        return (d[:, None] * q + m[:, None]).reshape(-1)
    if name in ("Q5_0", "Q5_1"):
        d = _f16(b[:, 0:2])
        o = 2 if name == "Q5_0" else 4
        qh = b[:, o : o + 4].copy().view("<u4")[:, 0]
        qs = b[:, o + 4 : o + 20]
        bits = ((qh[:, None] >> np.arange(32, dtype=np.uint32)[None, :]) & 1).astype(np.uint8)
        q = np.concatenate([(qs & 0xF) | (bits[:, :16] << 4), (qs >> 4) | (bits[:, 16:] << 4)], axis=1)
        q = q.astype(np.float32)
        if name == "Q5_0":
            return (d[:, None] * (q - 16)).reshape(-1)
        m = _f16(b[:, 2:4])
        return (d[:, None] * q + m[:, None]).reshape(-1)
    if name in ("Q4_K", "Q5_K"):
        d = _f16(b[:, 0:2])
        dmin = _f16(b[:, 2:4])
        sc, mn = _scale_min_k4(b[:, 4:16])
        if name == "Q4_K":
            qs = b[:, 16:144]
            qh = None
        else:
            qh = b[:, 16:48]
            qs = b[:, 48:176]
        out = np.empty((b.shape[0], QK_K), dtype=np.float32)
        for chunk in range(4):  # 64 elements per chunk: 32 low nibbles, then 32 high nibbles
            ql = qs[:, chunk * 32 : chunk * 32 + 32]
            lo = (ql & 0xF).astype(np.float32)
            hi = (ql >> 4).astype(np.float32)
            if qh is not None:
                lo += ((qh >> (2 * chunk)) & 1).astype(np.float32) * 16
                hi += ((qh >> (2 * chunk + 1)) & 1).astype(np.float32) * 16
            j = 2 * chunk
            out[:, chunk * 64 : chunk * 64 + 32] = (d * sc[:, j])[:, None] * lo - (dmin * mn[:, j])[:, None]
            out[:, chunk * 64 + 32 : chunk * 64 + 64] = (d * sc[:, j + 1])[:, None] * hi - (dmin * mn[:, j + 1])[:, None]
        return out.reshape(-1)
    if name == "Q6_K":
        ql_all = b[:, 0:128]
        qh_all = b[:, 128:192]
        sc_all = b[:, 192:208].view(np.int8).astype(np.float32)
        d = _f16(b[:, 208:210])
        out = np.empty((b.shape[0], QK_K), dtype=np.float32)
        for half in range(2):  # 128 elements each
            ql = ql_all[:, 64 * half : 64 * half + 64]
            qh = qh_all[:, 32 * half : 32 * half + 32]
            sc = sc_all[:, 8 * half : 8 * half + 8]
            q1 = ((ql[:, :32] & 0xF) | (((qh >> 0) & 3) << 4)).astype(np.float32) - 32
            q2 = ((ql[:, 32:] & 0xF) | (((qh >> 2) & 3) << 4)).astype(np.float32) - 32
            q3 = ((ql[:, :32] >> 4) | (((qh >> 4) & 3) << 4)).astype(np.float32) - 32
            q4 = ((ql[:, 32:] >> 4) | (((qh >> 6) & 3) << 4)).astype(np.float32) - 32
            base = 128 * half
            for k, q in enumerate((q1, q2, q3, q4)):
                # scale index: l/16 + 2k for l in 0..31 -> two scales per group of 32
                s = np.repeat(sc[:, 2 * k : 2 * k + 2], 16, axis=1)
                out[:, base + 32 * k : base + 32 * k + 32] = d[:, None] * s * q
        return out.reshape(-1)
    raise ValueError(f"no dequantizer for {name}")


def dequantize(info: TensorInfo) -> np.ndarray:
    n = int(np.prod(info.ne)) if info.ne else 1
    flat = dequantize_bytes(info.type, info.data, n)
    if flat.size != n:
        raise ValueError(f"tensor {info.name}: {flat.size} values for {n} elements")
    return flat.reshape(tuple(reversed(info.ne)))


def config_from_gguf(g: GgufFile):
    from model import Config

    md = g.metadata
    arch = md["general.architecture"]
    if arch not in ("llama", "qwen2", "qwen3"):
        raise ValueError(f"{g.path}: unsupported architecture {arch}")

    def k(name, default=None):
        v = md.get(f"{arch}.{name}", default)
        if v is None:
            raise ValueError(f"{g.path}: missing key {arch}.{name}")
        return v

    d = int(k("embedding_length"))
    n_head = int(k("attention.head_count"))
    head_dim = int(md.get(f"{arch}.attention.key_length", d // n_head))
    freq = None
    if "rope_freqs.weight" in g.tensors:
        freq = dequantize(g.tensors["rope_freqs.weight"]).astype(np.float64).tolist()
    scaling = None
    if md.get(f"{arch}.rope.scaling.type") == "llama3" or f"{arch}.rope.scaling.low_freq_factor" in md:
        scaling = {
            "type": "llama3",
            "factor": float(md.get(f"{arch}.rope.scaling.factor", 1.0)),
            "low_freq_factor": float(md.get(f"{arch}.rope.scaling.low_freq_factor", 1.0)),
            "high_freq_factor": float(md.get(f"{arch}.rope.scaling.high_freq_factor", 4.0)),
            "original_context": int(md.get(f"{arch}.rope.scaling.original_context_length", 8192)),
        }
    vocab_tensor = g.tensors["token_embd.weight"]
    return Config(
        arch=arch,
        n_layer=int(k("block_count")),
        d_model=d,
        n_head=n_head,
        n_kv_head=int(md.get(f"{arch}.attention.head_count_kv", n_head)),
        head_dim=head_dim,
        d_ff=int(k("feed_forward_length")),
        vocab=int(vocab_tensor.ne[1]),
        rms_eps=float(k("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(md.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_style="adjacent" if arch == "llama" else "halfsplit",
        rope_freq_factors=freq,
        rope_scaling=scaling,
        tied_output="output.weight" not in g.tensors,
        qkv_bias=f"blk.0.attn_q.bias" in g.tensors,
        qk_norm=f"blk.0.attn_q_norm.weight" in g.tensors,
        bos=int(md.get("tokenizer.ggml.bos_token_id", -1)),
        eos=int(md.get("tokenizer.ggml.eos_token_id", -1)),
    )


def load_gguf_model(path: str):
    g = read_gguf(path)
    cfg = config_from_gguf(g)
    w = {name: dequantize(t) for name, t in g.tensors.items() if name != "rope_freqs.weight"}
    return cfg, w


def _main():
    """python3 gguf_reader.py FILE.gguf OUT_DIR: writes each tensor dequantized to
    OUT_DIR/<name>.f32 (raw little-endian float32, slowest-first order), for comparing these
    dequantizers with another implementation."""
    import os
    import sys

    if len(sys.argv) != 3:
        sys.exit(__doc__ + "\n" + _main.__doc__)
    g = read_gguf(sys.argv[1])
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, t in g.tensors.items():
        dequantize(t).astype("<f4").tofile(os.path.join(sys.argv[2], name + ".f32"))


if __name__ == "__main__":
    _main()
