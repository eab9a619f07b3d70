#!/usr/bin/env bash
# bench-schedules.sh — pipeline schedules in `make bench` (docs/PERFORMANCE.md): on p = 4 stages
# with m = 8 micro-batches of bench-s (the split of bench-parallel.sh: 10 blocks as 3+3+3+1, the
# last stage carrying the LM head), each schedule's measured bubble beside its theory — its
# timeline with the run's measured per-stage F, B and W times (pipeline::implied_bubble, as the
# run summary prints it) — and its peak activation memory (the busiest rank's) against 1F1B's.
# The whole classifier (model.classifier_chunk = 0), so that the head's backward is in B and W as
# a block's is; the chunked classifier computes its gradient in the forward, which makes the last
# stage's F three times the others'. Rounds alternate the schedules, so that a drift of the host's
# speed hits each; each figure is the median over the rounds. 4 ranks share this host's 2 cores: a
# waiting stage sleeps (pipeline/runner.cpp), but two computing stages time-share a core.
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
      --model.layers=10 --parallel.stage_layers=3,3,3,1 --model.vocab=10240 --model.classifier_chunk=0 \
      > "$OUT/$name.log" 2>&1 \
      || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" "${SCHEDULES[@]}" <<'PY'
import re, sys, h5py, numpy as np
out, rounds, schedules = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
p, m = 4, 8
rows = {}
for s in schedules:
    measured, implied, equal, memory = [], [], [], []
    for r in range(1, rounds + 1):
        f = h5py.File(f"{out}/{s}_r{r}/metrics.h5", "r")
        stage = lambda st, k: f[f"stage{st}/{k}"][1:]
        phase = np.max([stage(st, "schedule_ms") for st in range(p)], axis=0)
        measured.append(np.median(np.mean([stage(st, "bubble_ms") / phase for st in range(p)], axis=0)))
        # The run's summary: the schedule's timeline with its measured stage times, and with equal stages.
        line = next(l for l in open(f"{out}/{s}_r{r}.log") if "pipeline bubble" in l)
        implied.append(float(re.search(r"with these stage times ([\d.]+)%", line).group(1)) / 100)
        equal.append(float(re.search(r"with equal stages ([\d.]+)%", line).group(1)) / 100)
        memory.append(f["memory/activations_peak_bytes"][-1])
    rows[s] = [float(np.median(x)) for x in (measured, implied, equal, memory)]
base = rows.get("1f1b")
for s, (measured, implied, equal, memory) in rows.items():
    versus = (f"; against 1F1B: bubble {measured / base[0]:.2f}x, peak activations {memory / base[3]:.3f}x"
              if base and s != "1f1b" else "")
    print(f"{s:6s} p={p} m={m}: bubble measured {100 * measured:.1f}% (median over steps), the schedule's with the "
          f"measured stage times {100 * implied:.1f}% (gap {100 * (measured - implied):+.1f} points; equal stages "
          f"{100 * equal:.1f}%); peak activations {memory / 2**20:.1f} MiB{versus}")
PY
