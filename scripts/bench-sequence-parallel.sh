#!/usr/bin/env bash
# bench-sequence-parallel.sh — sequence parallelism in `make bench` (docs/PERFORMANCE.md, issue
# 34): bench-s's shape with 8 heads (tensor 4 divides them), bf16, on tensor = 4 ranks, with and
# without parallel.sequence_parallel. Activation bytes per block, measured: the busiest rank's
# tracked activation peak of a 4-block model less that of a 2-block one, halved (everything but
# the blocks cancels); beside Korthikanti et al.'s Table 2 formula for the same shape, with and
# without sequence parallelism, less the dropout they count and we have no (masks and outputs)
# plus the LayerNorm statistics we keep; and the step time side by side (4 ranks on 2 cores:
# a ratio, noisy). Materialized attention, so that the 5as/(ht) term is there to compare.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-sequence-parallel}
STEPS=${BENCH_SP_STEPS:-6}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000
for layers in 2 4; do
  for sp in false true; do
    name="L${layers}_sp_$sp"
    mpirun -np 4 "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" --train.steps="$STEPS" \
      --train.eval_interval=0 --metrics.log_interval=1000 --parallel.tensor=4 --model.heads=8 --model.layers=$layers \
      --optim.precision=bf16 --model.attention=materialized --parallel.sequence_parallel=$sp \
      --data.train="$OUT/train.bin" --data.val="$OUT/val.bin" > "$OUT/$name.log" 2>&1 \
      || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import sys, h5py, numpy as np
out = sys.argv[1]
s, b, h, a, t = 256, 8, 384, 8, 4  # bench-s: seq, micro-batch, width, heads; tensor 4
f = lambda name: h5py.File(f"{out}/{name}/metrics.h5", "r")
peak = lambda L, sp: float(f(f"L{L}_sp_{sp}")["memory/activations_peak_bytes"][-1])
step = lambda sp: float(np.median(f(f"L4_sp_{sp}")["step_ms"][1:]))
ours = {sp: (peak(4, sp) - peak(2, sp)) / 2 for sp in ("false", "true")}
# Table 2 (16-bit, with dropout), less dropout's masks (2sbh) and attention dropout (3as²b), plus our statistics (16sb).
theirs = {"false": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) - 2 * s * b * h - 3 * a * s * s * b / t + 16 * s * b,
          "true": (s * b * h * (34 + 5 * a * s / h) - 2 * s * b * h - 3 * a * s * s * b + 16 * s * b) / t}
for sp, label in (("false", "tensor 4"), ("true", "tensor 4 + sequence parallel")):
    print(f"sequence_parallel {label:30s}: activations per block {ours[sp] / 2**20:.3f} MiB measured, "
          f"{theirs[sp] / 2**20:.3f} MiB by Korthikanti's formula without dropout ({100 * (ours[sp] / theirs[sp] - 1):+.2f}%)")
print(f"sequence_parallel ratio: {ours['true'] / ours['false']:.3f} of tensor parallelism alone per block "
      f"(the formulas: {theirs['true'] / theirs['false']:.3f}); step time {step('true') / step('false'):.2f}x "
      f"(median step {step('true'):.0f} ms against {step('false'):.0f} ms)")
PY
