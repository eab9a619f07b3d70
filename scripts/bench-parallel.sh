#!/usr/bin/env bash
# bench-parallel.sh — the parallel part of `make bench` (docs/PERFORMANCE.md), each figure a
# ratio of runs made here one after another on the bench-s model:
#   data parallel: data=2 on 2 ranks × 1 thread vs 1 rank × 1 thread, tokens/s (target ≥ 1.85×),
#     plain and with ZeRO-1
#   overlap: exposed share of the data-parallel reduction, comm.overlap on vs off
#   pipeline: measured bubble vs (p−1)/(m+p−1) for p = 2, 4 and m = 4, 8
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-parallel}
STEPS=${BENCH_STEPS:-6}
PIPELINE_STEPS=${BENCH_PIPELINE_STEPS:-11}  # a median over 10 steps: the pipeline runs are short
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
# Random tokens for bench-s's vocabulary (8192): llm.c shards, made once.
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000
COMMON=(--train.eval_tokens=2048 --train.eval_interval=0 --metrics.log_interval=1000
        --data.train="$OUT/train.bin" --data.val="$OUT/val.bin")
median() {  # median DATASET RUN_DIR over the steps after the first
  /usr/bin/python3 -c "import h5py, numpy as np; print(np.median(h5py.File('$2/metrics.h5')['$1'][1:]))"
}
run() {  # [RUN_STEPS=N] run NAME RANKS OVERRIDES...
  local name=$1 ranks=$2; shift 2
  mpirun -np "$ranks" "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" --train.steps="${RUN_STEPS:-$STEPS}" \
    "${COMMON[@]}" "$@" > "$OUT/$name.log" 2>&1 \
    || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
}

# Five rounds of alternating runs, so that a drift of the host's speed hits every side; each
# ratio is the median of the rounds'. data=2 plain (overlapped all-reduce of the gradients,
# every replica updating all parameters) and with ZeRO-1 (reduce-scatter after backward, each
# replica updating its half, all-gather of the parameters).
plain=() zero=()
for round in 1 2 3 4 5; do
  run serial 1 --train.micro_batch=4
  run data2 2 --train.micro_batch=4 --parallel.data=2
  run data2_zero1 2 --train.micro_batch=4 --parallel.data=2 --optim.zero=1
  serial=$(median tokens_per_s "$OUT/serial"); data2=$(median tokens_per_s "$OUT/data2")
  data2_zero1=$(median tokens_per_s "$OUT/data2_zero1")
  plain+=("$(echo "$data2 / $serial" | bc -l)") zero+=("$(echo "$data2_zero1 / $serial" | bc -l)")
  printf 'data parallel, round %d: 1 rank %.0f tok/s; data=2 on 2 ranks %.0f tok/s (%.2fx), with ZeRO-1 %.0f tok/s (%.2fx)\n' \
    "$round" "$serial" "$data2" "${plain[-1]}" "$data2_zero1" "${zero[-1]}"
done
middle() { printf '%s\n' "$@" | sort -g | sed -n 3p; }
printf 'data parallel: median of the rounds %.2fx, with ZeRO-1 %.2fx (target >= 1.85x)\n' "$(middle "${plain[@]}")" "$(middle "${zero[@]}")"

for overlap in true false; do
  run "overlap_$overlap" 2 --train.micro_batch=4 --parallel.data=2 --comm.overlap=$overlap
  exposed=$(median comm_exposed_ms "$OUT/overlap_$overlap"); total=$(median comm_ms "$OUT/overlap_$overlap")
  step=$(median step_ms "$OUT/overlap_$overlap")
  printf 'overlap %-5s: reduction %.1f ms, exposed %.1f ms = %.1f%% of the %.0f ms step (target with overlap <= 10%%)\n' \
    "$overlap" "$total" "$exposed" "$(echo "100 * $exposed / $step" | bc -l)" "$step"
done

# The bubble formula assumes equal stages. The LM head (6·Vp·C per token) sits on the last
# stage beside its blocks (6·12·C² + 12·T·C each); with the vocabulary at 10240 (the random
# tokens stay below 8192) it costs 2 blocks exactly (23.6 against 11.8 MFLOP per token), so
# the last stage carries 2 blocks fewer: 12 blocks as 7+5 for p = 2, 10 as 3+3+3+1 for p = 4.
# Besides the formula, the bubble the measured stage times imply: with t_s a stage's compute
# per micro-batch, a 1F1B step lasts Σ t_s + (m − 1)·max t_s, and stage s idles
# 1 − m·t_s / that (equal stages give (p−1)/(m+p−1) again) — what remains beyond it is ours.
# The measured bubble is also given as the median over steps of each step's bubble (the share
# of the step's pipeline phase its stages spent not computing, averaged over stages), like
# every other figure of this script: the run's mean beside it counts the host's slow steps too.
declare -A LAYERS=([2]=12 [4]=10) SPLIT=([2]="7,5" [4]="3,3,3,1")
for stages in 2 4; do
  for micro in 4 8; do
    name="pipeline${stages}_m${micro}"
    RUN_STEPS=$PIPELINE_STEPS run "$name" "$stages" --parallel.pipeline="$stages" --train.global_batch="$micro" \
      --train.micro_batch=1 --model.layers="${LAYERS[$stages]}" --parallel.stage_layers="${SPLIT[$stages]}" --model.vocab=10240
    grep -h 'pipeline bubble' "$OUT/$name.log" | sed "s/^/p=$stages m=$micro: /"
    /usr/bin/python3 - "$OUT/$name/metrics.h5" "$stages" "$micro" <<'PY'
import sys, h5py, numpy as np
f, p, m = h5py.File(sys.argv[1], "r"), int(sys.argv[2]), int(sys.argv[3])
stage = lambda s, k: f[f"stage{s}/{k}"][1:]
busy = [float(np.median(stage(s, "forward_ms") + stage(s, "backward_ms"))) for s in range(p)]
t = [b / m for b in busy]
step = sum(t) + (m - 1) * max(t)
expected = np.mean([1 - m * ts / step for ts in t])
phase = np.max([stage(s, "schedule_ms") for s in range(p)], axis=0)
per_step = np.mean([stage(s, "bubble_ms") / phase for s in range(p)], axis=0)
print(f"           median over steps {100 * np.median(per_step):.1f}% (steps: "
      f"{', '.join(f'{100 * b:.1f}' for b in per_step)}); formula {100 * (p - 1) / (m + p - 1):.1f}%")
print(f"           stage compute {', '.join(f'{b:.0f}' for b in busy)} ms (max/min {max(busy) / min(busy):.3f}); "
      f"bubble these stage times imply {100 * expected:.1f}%")
PY
  done
done
