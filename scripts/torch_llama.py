#!/usr/bin/python3
"""An independent PyTorch Llama, written from the published architecture, to check Trident's.

    torch_llama.py eval --checkpoint STEP.h5 --data val.bin --seq-len T --eval-tokens N

Reads the parameters of a Trident checkpoint of a llama model (h5py; any layout: a checkpoint's
datasets are whole) and prints `val_loss X`, the mean cross-entropy over the windows `trident
eval` uses (window w: tokens [w*T, w*T + T]), in float64. Nothing here is shared with Trident:

  h = x + W_o · attention(rope(W_q · n1), rope(W_k · n1), W_v · n1)     n1 = rmsnorm(x) · g1
  y = h + W_down · (silu(W_gate · n2) * (W_up · n2))                     n2 = rmsnorm(h) · g2
  logits = W_head · (rmsnorm(y_L) · g_f)

RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps). Rotary positions (Su et al. 2021)
in the rotate_half layout Hugging Face's Llama uses: value i and i + hs/2 of a head form a pair
rotated by t * theta^(-2i/hs). Grouped-query attention (Ainslie et al. 2023): query head h
attends with key/value head h // (heads / kv_heads). Causal softmax attention scaled by
1/sqrt(hs). SwiGLU (Shazeer 2020). The fused tensors are split as Trident lays them out (its
docs/MODEL.md): wqkv rows [q | k | v], w_gate_up rows [gate | up].
"""
import argparse
import math
import struct
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F


def attribute(f, name):
    value = f.attrs[name]
    if isinstance(value, bytes):
        value = value.decode()
    return value


def load(path):
    f = h5py.File(path, "r")
    cfg = {k: attribute(f, "model." + k) for k in ("layers", "heads", "hidden", "vocab", "padded_vocab", "kv_heads",
                                                   "ffn_hidden", "rope_theta", "norm_eps", "tie_embeddings", "arch")}
    for k in ("layers", "heads", "hidden", "vocab", "padded_vocab", "kv_heads", "ffn_hidden", "tie_embeddings"):
        cfg[k] = int(cfg[k])
    for k in ("rope_theta", "norm_eps"):
        cfg[k] = float(cfg[k])
    scaling = ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_context")
    for k in scaling:  # format 4 on; before, none
        cfg[k] = float(attribute(f, "model." + k)) if "model." + k in f.attrs else 1.0
    if cfg["arch"] != "llama":
        sys.exit(f"{path}: model.arch is {cfg['arch']}, not llama")
    p = {name: torch.from_numpy(np.array(f["params/" + name])).double() for name in f["params"]}
    return cfg, p


def rmsnorm(x, g, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


def inverse_frequencies(cfg, hs):
    """θ^(-2i/hs); with Llama 3.1's scaling as Meta's reference apply_scaling (llama/model.py) has it."""
    inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    factor = cfg["rope_factor"]
    if factor == 1.0:
        return inv
    low, high, n = cfg["rope_low_freq_factor"], cfg["rope_high_freq_factor"], cfg["rope_original_context"]
    out = []
    for f in inv.tolist():
        wavelength = 2 * math.pi / f
        if wavelength < n / high:
            out.append(f)
        elif wavelength > n / low:
            out.append(f / factor)
        else:
            smooth = (n / wavelength - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def rope(x, positions, inv):  # x (B, heads, T, hs)
    hs = x.shape[-1]
    angle = positions.double()[:, None] * inv[None, :]          # (T, hs/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
    half = torch.cat([-x[..., hs // 2:], x[..., :hs // 2]], -1)  # rotate_half
    return x * cos + half * sin


def forward(cfg, p, tokens):  # tokens (B, T) -> logits (B, T, V)
    B, T = tokens.shape
    C, H, KV = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    hs, Fh, eps = C // H, cfg["ffn_hidden"], cfg["norm_eps"]
    x = p["wte"][tokens]
    positions = torch.arange(T)
    inv = inverse_frequencies(cfg, hs)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(cfg["layers"]):
        n1 = rmsnorm(x, p["blocks.attn_norm"][l], eps)
        qkv = n1 @ p["blocks.wqkv"][l].T
        q, k, v = qkv.split([C, KV * hs, KV * hs], -1)
        q = rope(q.view(B, T, H, hs).transpose(1, 2), positions, inv)
        k = rope(k.view(B, T, KV, hs).transpose(1, 2), positions, inv)
        v = v.view(B, T, KV, hs).transpose(1, 2)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        att = (q @ k.transpose(-1, -2)) / hs ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p["blocks.wo"][l].T
        n2 = rmsnorm(x, p["blocks.mlp_norm"][l], eps)
        gate, up = (n2 @ p["blocks.w_gate_up"][l].T).split([Fh, Fh], -1)
        x = x + (F.silu(gate) * up) @ p["blocks.w_down"][l].T
    head = p["wte"] if cfg["tie_embeddings"] else p["head"]
    logits = rmsnorm(x, p["norm"], eps) @ head.T
    return logits[..., :cfg["vocab"]]  # the padded rows are never a token


def tokens_of(path):
    with open(path, "rb") as f:
        magic, _, count = struct.unpack("<3i", f.read(12))
        f.seek(1024)
        dtype = np.uint32 if magic == 20240801 else np.uint16
        return torch.from_numpy(np.frombuffer(f.read(np.dtype(dtype).itemsize * count), dtype=dtype).astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["eval"])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--eval-tokens", type=int, required=True)
    a = ap.parse_args()
    cfg, p = load(a.checkpoint)
    tokens, T = tokens_of(a.data), a.seq_len
    windows = a.eval_tokens // T
    total = 0.0
    with torch.no_grad():
        for w in range(windows):
            window = tokens[w * T: w * T + T + 1][None]
            logits = forward(cfg, p, window[:, :-1])
            total += F.cross_entropy(logits[0], window[0, 1:], reduction="sum").item()
    print(f"val_loss {total / (windows * T):.9g}")


if __name__ == "__main__":
    main()
