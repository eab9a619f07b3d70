#!/usr/bin/env bash
# bench-tp-overlap.sh — tensor-parallel communication overlapped with the GEMMs in `make bench`
# (docs/PERFORMANCE.md, issue 34, item 3): bench-s's shape with 8 heads on tensor = 2 ranks (a
# core each) with sequence parallelism, its all-gathers and reduce-scatters as MPI collectives
# and as the rings of parallel.tp_comm_overlap. Per run the median over the steps (the first
# left out) of the step time and of tensor_exposed_ms — the host's waits for the tensor
# group's communication; rounds alternate the two, the figure is the median over the rounds.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-tp-overlap}
STEPS=${BENCH_TP_STEPS:-8}
ROUNDS=${BENCH_ROUNDS:-3}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000 > /dev/null
for round in $(seq "$ROUNDS"); do
  for overlap in false true; do
    name="overlap_${overlap}_r$round"
    mpirun -np 2 "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" --train.steps="$STEPS" \
      --train.eval_interval=0 --metrics.log_interval=1000 --parallel.tensor=2 --model.heads=8 \
      --parallel.sequence_parallel=true --parallel.tp_comm_overlap=$overlap \
      --data.train="$OUT/train.bin" --data.val="$OUT/val.bin" > "$OUT/$name.log" 2>&1 \
      || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import sys, h5py, numpy as np
out, rounds = sys.argv[1], int(sys.argv[2])
fig = {}
for overlap in ("false", "true"):
    step, exposed = [], []
    for r in range(1, rounds + 1):
        f = h5py.File(f"{out}/overlap_{overlap}_r{r}/metrics.h5", "r")
        step.append(np.median(f["step_ms"][1:]))
        exposed.append(np.median(f["tensor_exposed_ms"][1:]))
    fig[overlap] = (float(np.median(step)), float(np.median(exposed)))
(s0, e0), (s1, e1) = fig["false"], fig["true"]
print(f"tp_comm_overlap tensor 2, sequence parallel: step {s0:.0f} ms with collectives, {s1:.0f} ms with the rings "
      f"({s1 / s0:.2f}x); exposed tensor-parallel time {e0:.1f} ms and {e1:.1f} ms ({e1 / e0:.2f}x)")
PY
