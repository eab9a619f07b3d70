#!/usr/bin/env bash
# bench-zero.sh — issue 33's memory target in `make bench` (docs/PERFORMANCE.md): per-rank state
# of GPT-2 124M (inputs/bench-124m.deck) in bf16 on 8 ranks, data 8, optim.zero = 1 and 2, steps
# of MICRO (default 2) micro-batches of one 64-token sequence per rank: the tracked parameter, gradient and optimizer bytes of the
# largest rank (metrics.h5's memory/*_bytes), and the step time, beside the same run with
# optim.zero = 0 where the machine's memory allows (ZERO0=1), and beside an older binary's
# optim.zero = 1 (OLD=path/to/trident: before the distributed optimizer its ranks kept the whole
# fp32 master, 4 + 8/d bytes per parameter of optimizer state).
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
RANKS=8
export OMP_NUM_THREADS=1
WORK=$(mktemp -d /tmp/trident-bench-zero.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/data"
/usr/bin/python3 scripts/random-tokens "$WORK/data" 50257 200000 70000 > /dev/null
run() {  # run KEY BINARY OVERRIDES...
  local key=$1 bin=$2
  shift 2
  mpirun -q -np "$RANKS" "$bin" train inputs/bench-124m.deck --train.run_dir="$WORK/$key" \
    --data.train="$WORK/data/train.bin" --data.val="$WORK/data/val.bin" --train.steps=2 --train.eval_interval=0 \
    --train.micro_batch=1 --train.global_batch=$((RANKS * ${MICRO:-2})) --model.seq_len=64 --parallel.data=$RANKS \
    --optim.precision=bf16 --checkpoint.at_end=false --checkpoint.full_interval=off "$@" > "$WORK/$key.out" 2>&1 ||
    { echo "bench-zero: $key failed: $(tail -3 "$WORK/$key.out")"; return 1; }
}
runs=(new zero2)
run new "$BIN" --optim.zero=1
run zero2 "$BIN" --optim.zero=2
if [[ ${ZERO0:-0} == 1 ]]; then run zero0 "$BIN" --optim.zero=0 && runs+=(zero0); fi
if [[ -n ${OLD:-} ]]; then run old "$OLD" --optim.zero=1 && runs+=(old); fi
/usr/bin/python3 - "$WORK" "${runs[@]}" <<'PY'
import sys, h5py, numpy as np
work, runs = sys.argv[1], sys.argv[2:]
label = {"new": "optim.zero = 1 (distributed optimizer)", "zero2": "optim.zero = 2", "zero0": "optim.zero = 0",
         "old": "optim.zero = 1, older binary (moments only)"}
rows = {}
for r in runs:
    f = h5py.File(f"{work}/{r}/metrics.h5", "r")
    rows[r] = {k: f[f"memory/{k}_bytes"][-1] / 2**20 for k in ("parameters", "gradients", "optimizer", "communication")}
    rows[r]["ms"] = f["step_ms"][-1] if "step_ms" in f else float("nan")
    rows[r]["exposed"] = float(np.max(f["comm_exposed_ms"][-1])) if "comm_exposed_ms" in f else float("nan")
print("GPT-2 124M bf16, data 8 (8 ranks, 1 thread each), micro-batches of 64 tokens per rank, tracked MiB of the largest rank:")
print(f"  {'':44s} {'parameters':>11s} {'gradients':>10s} {'optimizer':>10s} {'state':>8s} {'comm bufs':>10s} {'step ms':>9s} {'exposed ms':>11s}")
for r in runs:
    v = rows[r]
    state = v["parameters"] + v["gradients"] + v["optimizer"]
    print(f"  {label[r]:44s} {v['parameters']:11.1f} {v['gradients']:10.1f} {v['optimizer']:10.1f} {state:8.1f} "
          f"{v['communication']:10.1f} {v['ms']:9.0f} {v['exposed']:11.0f}")
two, one = rows["zero2"], rows["new"]
print(f"  ZeRO-2 / ZeRO-1: gradient bytes {two['gradients'] / one['gradients']:.3f}, step time {two['ms'] / one['ms']:.3f} (target <= 1.05)")
if "old" in rows:
    ratio = rows["new"]["optimizer"] / rows["old"]["optimizer"]
    print(f"  optimizer bytes, distributed optimizer / before: {ratio:.3f} (target <= 0.5)")
PY
