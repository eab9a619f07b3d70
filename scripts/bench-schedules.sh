#!/usr/bin/env bash
# bench-schedules.sh — pipeline schedules in `make bench` (docs/PERFORMANCE.md), p = 4 stages
# (or 2) and m = 8 micro-batches of bench-s: each schedule's measured bubble beside its theory — its
# timeline with the run's measured per-stage F, B and W times (pipeline::implied_bubble, as the
# run summary prints it) — and its peak activation memory (the busiest rank's) against 1F1B's.
#   zero bubble: 1F1B and ZB-H1 on 10 blocks as 3+3+3+1 (the last stage's LM head is about two
#     blocks: the split of bench-parallel.sh);
#     The whole classifier (model.classifier_chunk = 0), so that the head's backward is in B and
#     W as a block's is; the chunked classifier computes its gradient in the forward, which makes
#     the last stage's F three times the others'.
#   interleaved: 1F1B and interleaved 1F1B with v = 2 on 16 blocks split evenly (interleaving
#     needs equal chunks: 2 of 2 blocks per stage), on tokens of a 1024-word vocabulary, so that
#     the head (a tenth of a block) leaves the stages equal;
#   interleaved_p2: the same on p = 2 stages (4 chunks of 4 blocks), 2 ranks: a core each. Rounds alternate the schedules, so that a drift of the host's
# speed hits each; each figure is the median over the rounds. 4 ranks share this host's 2 cores: a
# waiting stage sleeps (pipeline/runner.cpp), but two computing stages time-share a core.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-schedules}
STEPS=${BENCH_PIPELINE_STEPS:-11}
ROUNDS=${BENCH_ROUNDS:-3}
SETS=(${SETS:-zero_bubble interleaved interleaved_p2})
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000
mkdir -p "$OUT/v1024"
[[ -f "$OUT/v1024/train.bin" ]] || scripts/random-tokens "$OUT/v1024" 1024 2000000 200000
declare -A COMMON=(
  [zero_bubble]="--model.layers=10 --parallel.stage_layers=3,3,3,1 --model.vocab=10240 --model.classifier_chunk=0
                 --data.train=$OUT/train.bin --data.val=$OUT/val.bin"
  [interleaved]="--model.layers=16 --model.vocab=1024 --data.train=$OUT/v1024/train.bin --data.val=$OUT/v1024/val.bin"
  [interleaved_p2]="--model.layers=16 --model.vocab=1024 --data.train=$OUT/v1024/train.bin --data.val=$OUT/v1024/val.bin")
declare -A STAGES=([zero_bubble]=4 [interleaved]=4 [interleaved_p2]=2)
declare -A OTHER=([zero_bubble]="zb-h1:--parallel.schedule=zb-h1" [interleaved]="1f1b-v2:--parallel.virtual_stages=2"
                  [interleaved_p2]="1f1b-v2:--parallel.virtual_stages=2")
for set in "${SETS[@]}"; do
  other=${OTHER[$set]}
  for round in $(seq "$ROUNDS"); do
    for label in 1f1b "${other%%:*}"; do
      extra=(); [[ $label == 1f1b ]] || extra=("${other#*:}")
      name="${set}_${label}_r$round"
      mpirun -np "${STAGES[$set]}" "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" --train.steps="$STEPS" \
        --train.eval_interval=0 --metrics.log_interval=1000 --parallel.pipeline="${STAGES[$set]}" --train.global_batch=8 \
        --train.micro_batch=1 ${COMMON[$set]} "${extra[@]}" > "$OUT/$name.log" 2>&1 \
        || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
    done
  done
  /usr/bin/python3 - "$OUT" "$ROUNDS" "${STAGES[$set]}" "$set" 1f1b "${other%%:*}" <<'PY'
import re, sys, h5py, numpy as np
out, rounds, p, group, schedules = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
m = 8
rows = {}
for s in schedules:
    measured, implied, equal, memory = [], [], [], []
    for r in range(1, rounds + 1):
        run = f"{out}/{group}_{s}_r{r}"
        f = h5py.File(f"{run}/metrics.h5", "r")
        stage = lambda st, k: f[f"stage{st}/{k}"][1:]
        phase = np.max([stage(st, "schedule_ms") for st in range(p)], axis=0)
        measured.append(np.median(np.mean([stage(st, "bubble_ms") / phase for st in range(p)], axis=0)))
        # The run's summary: the schedule's timeline with its measured stage times, and with equal stages.
        line = next(l for l in open(f"{run}.log") if "pipeline bubble" in l)
        implied.append(float(re.search(r"with these stage times ([\d.]+)%", line).group(1)) / 100)
        equal.append(float(re.search(r"with equal stages ([\d.]+)%", line).group(1)) / 100)
        memory.append(f["memory/activations_peak_bytes"][-1])
    rows[s] = [float(np.median(x)) for x in (measured, implied, equal, memory)]
base = rows["1f1b"]
for s, (measured, implied, equal, memory) in rows.items():
    versus = (f"; against 1F1B: bubble {measured / base[0]:.2f}x, peak activations {memory / base[3]:.3f}x"
              if s != "1f1b" else "")
    print(f"{group:11s} {s:7s} p={p} m={m}: bubble measured {100 * measured:.1f}% (median over steps), the "
          f"schedule's with the measured stage times {100 * implied:.1f}% (gap {100 * (measured - implied):+.1f} "
          f"points; equal stages {100 * equal:.1f}%); peak activations {memory / 2**20:.1f} MiB{versus}")
PY
done
