#!/usr/bin/env bash
# bench-schedules.sh — pipeline schedules in `make bench` (docs/PERFORMANCE.md): on p = 4 stages
# with m = 8 micro-batches of bench-s (the split of bench-parallel.sh: 10 blocks as 3+3+3+1, the
# last stage carrying the LM head), each schedule's measured bubble beside its theory
# (pipeline::bubble_fraction from the run's measured F, B and W times), and its peak activation
# memory (the busiest rank's) against 1F1B's. Rounds alternate the schedules, so that a drift of
# the host's speed hits each; each figure is the median over the rounds of the median over steps.
# 4 ranks share this host's cores: a waiting stage sleeps (pipeline/runner.cpp), but two
# computing stages time-share a core — the measured bubble is what these ranks saw.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-schedules}
STEPS=${BENCH_PIPELINE_STEPS:-11}
ROUNDS=${BENCH_ROUNDS:-3}
SCHEDULES=(${SCHEDULES:-1f1b zb-h1})
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000
for round in $(seq "$ROUNDS"); do
  for schedule in "${SCHEDULES[@]}"; do
    name="${schedule}_r$round"
    mpirun -np 4 "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" --train.steps="$STEPS" \
      --train.eval_interval=0 --metrics.log_interval=1000 --data.train="$OUT/train.bin" --data.val="$OUT/val.bin" \
      --parallel.pipeline=4 --parallel.schedule="$schedule" --train.global_batch=8 --train.micro_batch=1 \
      --model.layers=10 --parallel.stage_layers=3,3,3,1 --model.vocab=10240 > "$OUT/$name.log" 2>&1 \
      || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" "${SCHEDULES[@]}" <<'PY'
import sys, h5py, numpy as np
sys.path.insert(0, "scripts")
out, rounds, schedules = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
p, m = 4, 8
def theory(schedule, f, b, w):  # pipeline::bubble_fraction's closed forms (w <= min(f, b) here)
    if schedule == "zb-h1":
        idle = (p - 1) * (f + b - w)
        return idle / (m * (f + b + w) + idle)
    return (p - 1) / (m + p - 1)
rows = {}
for s in schedules:
    measured, predicted, memory, ratios = [], [], [], []
    for r in range(1, rounds + 1):
        f = h5py.File(f"{out}/{s}_r{r}/metrics.h5", "r")
        stage = lambda st, k: f[f"stage{st}/{k}"][1:]
        phase = np.max([stage(st, "schedule_ms") for st in range(p)], axis=0)
        measured.append(np.median(np.mean([stage(st, "bubble_ms") / phase for st in range(p)], axis=0)))
        fw = np.median(f["forward_ms"][1:]); bw = np.median(f["backward_ms"][1:]); w = np.median(f["weights_ms"][1:])
        predicted.append(theory(s, fw, bw - w, w))
        ratios.append((bw - w) / fw if s == "zb-h1" else 0)
        memory.append(f["memory/activations_peak_bytes"][-1])
    rows[s] = (np.median(measured), np.median(predicted), np.median(memory), np.median(ratios))
base = rows.get("1f1b")
for s, (measured, predicted, memory, ratio) in rows.items():
    extra = f"; F:B measured 1:{ratio:.2f}" if s == "zb-h1" else ""
    versus = f"; against 1F1B: bubble {measured / base[0]:.2f}x, peak activations {memory / base[2]:.3f}x" if base and s != "1f1b" else ""
    print(f"{s:6s} p={p} m={m}: bubble measured {100 * measured:.1f}%, theory {100 * predicted:.1f}% "
          f"(gap {100 * (measured - predicted):+.1f} points); peak activations {memory / 2**20:.1f} MiB{extra}{versus}")
PY
