#!/usr/bin/python3
"""Independent PyTorch GPT-2 for checking and benchmarking Trident.

Subcommands:
  eval   validation loss of an llm.c model file on an llm.c (or raw u16)
         token file, in float64 by default, as a reference for Trident.
  bench  fp32 training-step throughput of a random GPT-2 with PyTorch's best
         thread settings for a given number of threads (PyTorch baseline).

The model is written out here with explicit parameters shaped as in the
llm.c file (no library GPT-2 class), so it does not share code with Trident.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

MODEL_MAGIC = 20240326
MODEL_VERSION_FP32 = 3
TOKENS_MAGIC = 20240520
TOKENS_VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4

# Parameter tensors in file order, with their shapes as functions of the
# config (maxT, V, L, NH, C, Vp).
PARAM_SHAPES = [
    ("wte", lambda c: (c["Vp"], c["C"])),
    ("wpe", lambda c: (c["maxT"], c["C"])),
    ("ln1w", lambda c: (c["L"], c["C"])),
    ("ln1b", lambda c: (c["L"], c["C"])),
    ("qkvw", lambda c: (c["L"], 3 * c["C"], c["C"])),
    ("qkvb", lambda c: (c["L"], 3 * c["C"])),
    ("attprojw", lambda c: (c["L"], c["C"], c["C"])),
    ("attprojb", lambda c: (c["L"], c["C"])),
    ("ln2w", lambda c: (c["L"], c["C"])),
    ("ln2b", lambda c: (c["L"], c["C"])),
    ("fcw", lambda c: (c["L"], 4 * c["C"], c["C"])),
    ("fcb", lambda c: (c["L"], 4 * c["C"])),
    ("fcprojw", lambda c: (c["L"], c["C"], 4 * c["C"])),
    ("fcprojb", lambda c: (c["L"], c["C"])),
    ("lnfw", lambda c: (c["C"],)),
    ("lnfb", lambda c: (c["C"],)),
]


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------
# File reading
# ---------------------------------------------------------------------------

def read_header(path, f):
    raw = f.read(HEADER_BYTES)
    if len(raw) != HEADER_BYTES:
        fail(f"{path}: too short for a {HEADER_BYTES}-byte header")
    return np.frombuffer(raw, dtype="<i4")


def param_count(cfg):
    return sum(math.prod(shape(cfg)) for _, shape in PARAM_SHAPES)


def read_model(path):
    """Returns (config dict, dict of float32 numpy arrays) of an llm.c file."""
    try:
        with open(path, "rb") as f:
            h = read_header(path, f)
            data = f.read()
    except OSError as e:
        fail(f"cannot read model file {path}: {e}")
    if h[0] != MODEL_MAGIC:
        fail(f"{path}: bad model magic {h[0]} (expected {MODEL_MAGIC})")
    if h[1] != MODEL_VERSION_FP32:
        fail(f"{path}: model version {h[1]} unsupported (expected "
             f"{MODEL_VERSION_FP32}, fp32)")
    cfg = dict(maxT=int(h[2]), V=int(h[3]), L=int(h[4]), NH=int(h[5]),
               C=int(h[6]), Vp=int(h[7]))
    if min(cfg.values()) <= 0:
        fail(f"{path}: non-positive size in header {cfg}")
    if cfg["Vp"] < cfg["V"]:
        fail(f"{path}: padded vocab {cfg['Vp']} < vocab {cfg['V']}")
    if cfg["C"] % cfg["NH"] != 0:
        fail(f"{path}: channels {cfg['C']} not divisible by heads {cfg['NH']}")
    expected = 4 * param_count(cfg)
    if len(data) != expected:
        fail(f"{path}: has {len(data)} bytes of parameters after the header, "
             f"expected exactly {expected} for {cfg}")
    flat = np.frombuffer(data, dtype="<f4")
    params, offset = {}, 0
    for name, shape_fn in PARAM_SHAPES:
        shape = shape_fn(cfg)
        n = math.prod(shape)
        params[name] = flat[offset:offset + n].reshape(shape)
        offset += n
    return cfg, params


def read_tokens(path, fmt):
    """Returns the tokens of an llmc or raw u16 file as a numpy uint16 array."""
    try:
        with open(path, "rb") as f:
            if fmt == "llmc":
                h = read_header(path, f)
            data = f.read()
    except OSError as e:
        fail(f"cannot read token file {path}: {e}")
    if fmt == "llmc":
        if h[0] != TOKENS_MAGIC:
            fail(f"{path}: bad token magic {h[0]} (expected {TOKENS_MAGIC})")
        if h[1] != TOKENS_VERSION:
            fail(f"{path}: token version {h[1]} unsupported (expected "
                 f"{TOKENS_VERSION})")
        if h[2] < 0 or len(data) != 2 * int(h[2]):
            fail(f"{path}: header says {h[2]} tokens but {len(data)} bytes "
                 f"follow the header")
    elif len(data) % 2 != 0:
        fail(f"{path}: odd byte count {len(data)} for a u16 token file")
    return np.frombuffer(data, dtype="<u2")


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

class GPT2(torch.nn.Module):
    """GPT-2 with parameters stored exactly as in the llm.c file.

    Per-layer parameters are stacked along a leading L dimension, as in the
    file, so loading is a plain copy and nothing is transposed.
    """

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        for name, shape_fn in PARAM_SHAPES:
            setattr(self, name, torch.nn.Parameter(
                torch.empty(shape_fn(cfg), dtype=dtype)))

    def load_numpy(self, arrays):
        with torch.no_grad():
            for name, _ in PARAM_SHAPES:
                p = getattr(self, name)
                p.copy_(torch.from_numpy(np.array(arrays[name])).to(p.dtype))

    def init_random(self, seed=0):
        """GPT-2 style init: N(0, 0.02) weights, zero biases, unit LN gains."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, _ in PARAM_SHAPES:
                p = getattr(self, name)
                if name.endswith("b"):
                    p.zero_()
                elif name.startswith("ln"):
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02, generator=g)

    def attention(self, x, l):
        B, T, C = x.shape
        NH = self.cfg["NH"]
        hs = C // NH
        qkv = F.linear(x, self.qkvw[l], self.qkvb[l])
        # Rows of qkvw are [q; k; v]; each head is a contiguous hs-slice.
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        scores = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(hs))
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        y = scores.softmax(dim=-1) @ v  # (B, NH, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)
        return F.linear(y, self.attprojw[l], self.attprojb[l])

    def mlp(self, x, l):
        h = F.linear(x, self.fcw[l], self.fcb[l])
        # GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
        h = F.gelu(h, approximate="tanh")
        return F.linear(h, self.fcprojw[l], self.fcprojb[l])

    def hidden(self, tokens):
        """Final LayerNorm output, shape (B, T, C), for int64 tokens (B, T)."""
        B, T = tokens.shape
        C = self.cfg["C"]
        x = self.wte[tokens] + self.wpe[:T]
        for l in range(self.cfg["L"]):
            x = x + self.attention(
                F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], 1e-5), l)
            x = x + self.mlp(
                F.layer_norm(x, (C,), self.ln2w[l], self.ln2b[l], 1e-5), l)
        return F.layer_norm(x, (C,), self.lnfw, self.lnfb, 1e-5)

    def logits(self, h):
        """Tied LM head over all Vp rows of wte (as Trident computes it), cut
        to the first V columns: padded columns are excluded from the softmax."""
        return F.linear(h, self.wte)[..., :self.cfg["V"]]

    def loss(self, tokens, targets):
        """Mean cross-entropy over all positions."""
        logits = self.logits(self.hidden(tokens))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))


# ---------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------

def cmd_eval(args):
    dtype = torch.float64 if args.precision == "fp64" else torch.float32
    cfg, arrays = read_model(args.model)
    tokens = read_tokens(args.data, args.format)
    T, N = args.seq_len, args.eval_tokens
    if T <= 0 or N < 0 or args.batch <= 0:
        fail("--seq-len and --batch must be positive, --eval-tokens >= 0")
    if T > cfg["maxT"]:
        fail(f"--seq-len {T} exceeds the model's max sequence length "
             f"{cfg['maxT']} ({args.model})")
    n = N // T
    if n == 0:
        fail(f"--eval-tokens {N} gives no window of --seq-len {T}")
    need = n * T + 1
    if len(tokens) < need:
        fail(f"{args.data}: has {len(tokens)} tokens, {n} windows of {T} "
             f"need {need}")
    used = torch.from_numpy(tokens[:need].astype(np.int64))
    if int(used.max()) >= cfg["V"]:
        bad = int((used >= cfg["V"]).nonzero()[0])
        fail(f"{args.data}: token {int(used[bad])} at index {bad} is >= "
             f"vocab size {cfg['V']}")

    model = GPT2(cfg, dtype)
    model.load_numpy(arrays)
    model.eval()
    x = used[:n * T].view(n, T)
    y = used[1:need].view(n, T)

    total = 0.0  # summed in Python float (double) whatever the precision
    with torch.no_grad():
        for start in range(0, n, args.batch):
            h = model.hidden(x[start:start + args.batch])
            # LM head + softmax one window at a time: (T, V) logits at a time
            # instead of (B, T, V), which is GBs in float64 for GPT-2 sizes.
            for hw, yw in zip(h, y[start:start + args.batch]):
                logp = model.logits(hw).log_softmax(dim=-1)
                total -= float(logp.gather(1, yw[:, None]).double().sum())
    print(f"# model {args.model}: {cfg}; {n} windows x {T} tokens, "
          f"{args.precision}")
    print("val_loss %.6g" % (total / (n * T)))


# ---------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------

def bench_config(args):
    vp = (args.vocab + 127) // 128 * 128
    return dict(maxT=args.seq_len, V=args.vocab, L=args.layers,
                NH=args.heads, C=args.hidden, Vp=vp)


def flops_per_step(cfg, B, T):
    L, C, Vp = cfg["L"], cfg["C"], cfg["Vp"]
    matmul_params = L * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + Vp * C
    # Attention: QK^T and PV are 2*B*T*T*C FLOPs each forward, x3 for fwd+bwd,
    # counted over the full T x T as both implementations compute it: the same
    # formula as Trident's training_flops_per_token (docs/PERFORMANCE.md).
    attention = 12 * L * B * T * T * C
    return 6 * B * T * matmul_params + attention


def loaded_blas():
    """Which BLAS libraries this process has mapped (Linux only): Debian's
    torch calls whatever libblas.so.3 the alternatives system points to,
    OpenBLAS or the far slower reference BLAS, so the result depends on it."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return "unknown"
    return ", ".join(sorted({os.path.realpath(p) for p in paths})) or "none"


def cmd_bench_worker(args):
    """One thread setting, run in its own process: the OpenBLAS/OpenMP
    thread counts are read from the environment when torch is imported."""
    torch.set_num_threads(args.intra_op_threads)
    cfg = bench_config(args)
    B, T = args.micro_batch, args.seq_len
    model = GPT2(cfg, torch.float32)
    model.init_random(seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, cfg["V"], (B, T + 1), generator=g)
    x, y = data[:, :T], data[:, 1:]

    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss = model.loss(x, y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if step >= args.warmup:
            times.append(t1 - t0)
    print(json.dumps({"step_ms": 1000 * statistics.median(times),
                      "loss": float(loss), "blas": loaded_blas()}))


def openblas_coretype():
    """The OpenBLAS kernel set for this CPU. OpenBLAS 0.3.21 (Debian 12) does not know recent
    Xeons and falls back to its generic 'Prescott' kernels (measured here: torch's matmul at
    29 GFLOP/s instead of 118); name the right one unless the user already did."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return None
    if "avx512f" in flags:
        return "SkylakeX"
    if "avx2" in flags:
        return "Haswell"
    return None


def run_worker(args, intra, blas):
    env = dict(os.environ, OMP_NUM_THREADS=str(intra),
               OPENBLAS_NUM_THREADS=str(blas))
    if openblas_coretype():
        env["OPENBLAS_CORETYPE"] = openblas_coretype()
    cmd = [sys.executable, os.path.abspath(__file__), "bench-worker",
           "--intra-op-threads", str(intra)]
    for opt in ("layers", "heads", "hidden", "vocab", "seq_len",
                "micro_batch", "steps", "warmup", "autocast"):
        cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"bench worker (intra={intra}, openblas={blas}) failed:\n"
             f"{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def cmd_bench(args):
    if args.threads <= 0 or args.steps <= 0 or args.warmup < 0:
        fail("--threads and --steps must be positive, --warmup >= 0")
    if args.hidden % args.heads != 0:
        fail(f"--hidden {args.hidden} not divisible by --heads {args.heads}")
    cfg = bench_config(args)
    tokens = args.micro_batch * args.seq_len
    flops = flops_per_step(cfg, args.micro_batch, args.seq_len)
    print(f"# model {cfg}, B={args.micro_batch} T={args.seq_len}, "
          f"{flops / 1e9:.3f} GFLOP/step")
    best = None
    for intra in range(1, args.threads + 1):
        for blas in range(1, args.threads + 1):
            result = run_worker(args, intra, blas)
            ms = result["step_ms"]
            print(f"# intra_op_threads={intra} openblas_threads={blas}: "
                  f"step_ms={ms:.2f} tokens_per_s={tokens / ms * 1e3:.1f} "
                  f"loss={result['loss']:.4f} blas={result['blas']}",
                  flush=True)
            if best is None or ms < best[0]:
                best = (ms, intra, blas)
    ms, intra, blas = best
    print(json.dumps({
        "threads": args.threads,
        "tokens_per_s": round(tokens / ms * 1e3, 2),
        "step_ms": round(ms, 3),
        "intra_op_threads": intra,
        "openblas_threads": blas,
        "flops_per_step": flops,
        "gflops": round(flops / (ms * 1e-3) / 1e9, 3),
    }))


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def add_bench_model_args(p):
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--hidden", type=int, default=384, help="channels C")
    p.add_argument("--vocab", type=int, default=8192,
                   help="vocab V (padded to a multiple of 128 for the head)")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps")
    p.add_argument("--autocast", choices=["none", "bf16"], default="none",
                   help="bf16: torch.autocast on the CPU (bf16 GEMMs, fp32 weights)")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True,
                               metavar="{eval,bench}")

    e = sub.add_parser("eval", help="validation loss of an llm.c model file")
    e.add_argument("--model", required=True, help="llm.c fp32 model file")
    e.add_argument("--data", required=True, help="token file")
    e.add_argument("--format", choices=["llmc", "u16"], default="llmc")
    e.add_argument("--seq-len", type=int, required=True, help="window T")
    e.add_argument("--eval-tokens", type=int, required=True,
                   help="N; floor(N/T) windows are evaluated")
    e.add_argument("--batch", type=int, default=8, help="windows per batch")
    e.add_argument("--precision", choices=["fp64", "fp32"], default="fp64")
    e.set_defaults(func=cmd_eval)

    b = sub.add_parser("bench", help="training-step throughput (fp32, or bf16 autocast)")
    add_bench_model_args(b)
    b.add_argument("--threads", type=int, required=True,
                   help="K; all intra-op x OpenBLAS counts in 1..K are tried")
    b.set_defaults(func=cmd_bench)

    # Internal: one timed run with thread settings fixed by the environment.
    w = sub.add_parser("bench-worker")
    add_bench_model_args(w)
    w.add_argument("--intra-op-threads", type=int, required=True)
    w.set_defaults(func=cmd_bench_worker)
    return ap.parse_args()


def main():
    args = parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
