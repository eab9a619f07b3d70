#!/usr/bin/python3
"""An independent PyTorch Llama, written from the published architecture, to check Trident's.

    torch_llama.py eval --checkpoint STEP.h5 --data val.bin --seq-len T --eval-tokens N
    torch_llama.py bench --threads N [--layers ... --kv-heads ... --ffn-hidden ...]

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

`bench` times the same forward in float32 as a training step (autograd, AdamW) on random tokens,
every split of N threads between PyTorch's intra-op threads and OpenBLAS's tried, each in a
process of its own (scripts/bench.sh sets it beside `trident bench`); the last line is
JSON with the best setting's tokens_per_s.
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time

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
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(x.dtype), torch.cat([angle.sin()] * 2, -1).to(x.dtype)
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


BENCH_SHAPE = ("layers", "heads", "kv_heads", "hidden", "ffn_hidden", "vocab", "seq_len", "micro_batch")


def bench_parameters(a):
    """Random parameters of the bench shape, float32, as Trident initialises them (N(0, 0.02), norms 1)."""
    C, hs, L, F_ = a.hidden, a.hidden // a.heads, a.layers, a.ffn_hidden
    Vp = (a.vocab + 127) // 128 * 128
    g = torch.Generator().manual_seed(0)
    normal = lambda *shape: (torch.randn(*shape, generator=g) * 0.02).requires_grad_()
    ones = lambda *shape: torch.ones(*shape).requires_grad_()
    p = {"wte": normal(Vp, C), "head": normal(Vp, C), "norm": ones(C),
         "blocks.attn_norm": ones(L, C), "blocks.wqkv": normal(L, C + 2 * a.kv_heads * hs, C),
         "blocks.wo": normal(L, C, C), "blocks.mlp_norm": ones(L, C),
         "blocks.w_gate_up": normal(L, 2 * F_, C), "blocks.w_down": normal(L, C, F_)}
    cfg = {"layers": L, "heads": a.heads, "kv_heads": a.kv_heads, "hidden": C, "ffn_hidden": F_,
           "vocab": a.vocab, "padded_vocab": Vp, "rope_theta": 10000.0, "norm_eps": 1e-5, "tie_embeddings": 0,
           "rope_factor": 1.0}
    return cfg, p


def cmd_bench_worker(a):
    torch.set_num_threads(a.intra_op_threads)
    cfg, p = bench_parameters(a)
    opt = torch.optim.AdamW(p.values(), lr=1e-4, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8)
    data = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), generator=torch.Generator().manual_seed(1))
    x, y = data[:, :-1], data[:, 1:]
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(cfg, p, x).reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"step_ms": 1000 * statistics.median(times), "loss": float(loss)}))


def cmd_bench(a):
    """Every (intra-op, OpenBLAS) split of the threads, each in its own process (the thread counts
    are read when torch loads); the best one's rate."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt2 import openblas_coretype
    tokens, best = a.micro_batch * a.seq_len, None
    for intra in range(1, a.threads + 1):
        for blas in range(1, a.threads + 1):
            env = dict(os.environ, OMP_NUM_THREADS=str(intra), OPENBLAS_NUM_THREADS=str(blas))
            if openblas_coretype():
                env["OPENBLAS_CORETYPE"] = openblas_coretype()
            cmd = [sys.executable, os.path.abspath(__file__), "bench-worker", "--intra-op-threads", str(intra),
                   "--steps", str(a.steps), "--warmup", str(a.warmup)]
            for k in BENCH_SHAPE:
                cmd += ["--" + k.replace("_", "-"), str(getattr(a, k))]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit(f"bench worker (intra={intra}, openblas={blas}) failed:\n{res.stderr}")
            ms = json.loads(res.stdout.strip().splitlines()[-1])["step_ms"]
            print(f"# intra_op_threads={intra} openblas_threads={blas}: step_ms={ms:.2f}", flush=True)
            if best is None or ms < best[0]:
                best = (ms, intra, blas)
    ms, intra, blas = best
    print(json.dumps({"threads": a.threads, "tokens_per_s": round(tokens / ms * 1e3, 2), "step_ms": round(ms, 3),
                      "intra_op_threads": intra, "openblas_threads": blas}))


def cmd_eval(a):
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


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--seq-len", type=int, required=True)
    e.add_argument("--eval-tokens", type=int, required=True)
    for name in ("bench", "bench-worker"):
        b = sub.add_parser(name)
        b.add_argument("--threads", type=int, default=1)
        b.add_argument("--intra-op-threads", type=int, default=1)
        for k, default in zip(BENCH_SHAPE, (6, 6, 2, 384, 1024, 8192, 256, 8)):  # inputs/bench-llama.deck
            b.add_argument("--" + k.replace("_", "-"), type=int, default=default)
        b.add_argument("--steps", type=int, default=5)
        b.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    {"eval": cmd_eval, "bench": cmd_bench, "bench-worker": cmd_bench_worker}[a.command](a)


if __name__ == "__main__":
    main()
