#!/usr/bin/env bash
# bench-checkpoint.sh — the checkpoint part of `make bench` (docs/CHECKPOINTS.md), on bench-s:
#   write bandwidth of a full checkpoint beside a plain sequential write (write + fsync) of the
#   same bytes to the same directory, alternating in one run (target >= 70%); restart time;
#   the blocking time of an asynchronous checkpoint as a share of a training step (target <= 5%),
#   beside that of a synchronous one.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-checkpoint}
STEPS=${BENCH_STEPS:-8}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

echo "checkpoint of bench-s (fp32 parameters + AdamW moments), full, one rank, $OMP_NUM_THREADS thread(s):"
line=$("$BIN" bench inputs/bench-s.deck --checkpoint --steps=7 --train.run_dir="$OUT/writes" | tail -1)
printf '  %.1f MB: checkpoint %.2f GB/s, plain write %.2f GB/s: %.0f%% of plain; verify %.3f s; restart (verify + read) %.3f s\n' \
  "$(echo "$line" | field bytes | awk '{print $1 / 1e6}')" "$(echo "$line" | field write_gbps)" \
  "$(echo "$line" | field plain_gbps)" "$(echo "$line" | field of_plain | awk '{print $1 * 100}')" \
  "$(echo "$line" | field verify_s)" "$(echo "$line" | field restart_s)"
line=$(mpirun -q -np 2 "$BIN" bench inputs/bench-s.deck --checkpoint --steps=7 --parallel.tensor=2 \
  --train.run_dir="$OUT/writes2" | tail -1)
printf '  tensor 2 (two writers, collective I/O): checkpoint %.2f GB/s, plain %.2f GB/s: %.0f%% of plain\n' \
  "$(echo "$line" | field write_gbps)" "$(echo "$line" | field plain_gbps)" "$(echo "$line" | field of_plain | awk '{print $1 * 100}')"

# Random tokens for bench-s's vocabulary, made once.
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 1000000 100000
echo "blocking time of a full checkpoint every 2 steps, as a share of the median step (bench-s, $STEPS steps):"
for mode in true false; do
  rm -rf "$OUT/train-$mode"
  "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/train-$mode" --train.steps="$STEPS" --train.eval_tokens=2048 \
    --metrics.log_interval=1000 --data.train="$OUT/train.bin" --data.val="$OUT/val.bin" \
    --checkpoint.full_interval=2steps --checkpoint.at_end=false --checkpoint.async=$mode > "$OUT/train-$mode.out"
  /usr/bin/python3 - "$OUT/train-$mode" "$mode" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1] + "/metrics.h5", "r")
step = float(np.median(f["step_ms"][1:]))
blocking = f["checkpoint/blocking_ms"][:]
kind = "asynchronous" if sys.argv[2] == "true" else "synchronous "
print(f"  {kind}: blocking {np.median(blocking):7.1f} ms (median of {len(blocking)}), step {step:7.1f} ms: "
      f"{100 * np.median(blocking) / step:5.1f}% of a step")
PY
done
