#!/usr/bin/env bash
# bench-parallel.sh — the parallel part of `make bench` (docs/PERFORMANCE.md), each figure a
# ratio of runs made here one after another on the bench-s model:
#   data parallel: data=2 on 2 ranks × 1 thread vs 1 rank × 1 thread, tokens/s (target ≥ 1.85×)
#   overlap: exposed share of the data-parallel reduction, comm.overlap on vs off
#   pipeline: measured bubble vs (p−1)/(m+p−1) for p = 2, 4 and m = 4, 8
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-parallel}
STEPS=${BENCH_STEPS:-6}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
# Random tokens for bench-s's vocabulary (8192): llm.c shards, made once.
[[ -f "$OUT/train.bin" ]] || scripts/random-tokens "$OUT" 8192 2000000 200000
COMMON=(--train.steps="$STEPS" --train.eval_tokens=2048 --train.eval_interval=0 --metrics.log_interval=1000
        --data.train="$OUT/train.bin" --data.val="$OUT/val.bin")
median() {  # median DATASET RUN_DIR over the steps after the first
  /usr/bin/python3 -c "import h5py, numpy as np; print(np.median(h5py.File('$2/metrics.h5')['$1'][1:]))"
}
run() {  # run NAME RANKS OVERRIDES...
  local name=$1 ranks=$2; shift 2
  mpirun -np "$ranks" "$BIN" train inputs/bench-s.deck --train.run_dir="$OUT/$name" "${COMMON[@]}" "$@" > "$OUT/$name.log" 2>&1 \
    || { echo "run $name failed: $(tail -3 "$OUT/$name.log")"; exit 1; }
}

# Three alternating pairs, so that a drift of the host's speed hits both sides; the ratio is
# the median of the pairs' ratios.
ratios=()
for round in 1 2 3; do
  run serial 1 --train.micro_batch=4
  run data2 2 --train.micro_batch=4 --parallel.data=2
  serial=$(median tokens_per_s "$OUT/serial"); data2=$(median tokens_per_s "$OUT/data2")
  ratios+=("$(echo "$data2 / $serial" | bc -l)")
  printf 'data parallel, pair %d: 1 rank %.0f tok/s, data=2 on 2 ranks %.0f tok/s: %.2fx\n' \
    "$round" "$serial" "$data2" "${ratios[-1]}"
done
printf 'data parallel: median of the pairs %.2fx (target >= 1.85x)\n' \
  "$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n 2p)"

for overlap in true false; do
  run "overlap_$overlap" 2 --train.micro_batch=4 --parallel.data=2 --comm.overlap=$overlap
  exposed=$(median comm_exposed_ms "$OUT/overlap_$overlap"); total=$(median comm_ms "$OUT/overlap_$overlap")
  step=$(median step_ms "$OUT/overlap_$overlap")
  printf 'overlap %-5s: reduction %.1f ms, exposed %.1f ms = %.1f%% of the %.0f ms step (target with overlap <= 10%%)\n' \
    "$overlap" "$total" "$exposed" "$(echo "100 * $exposed / $step" | bc -l)" "$step"
done

# Blocks split so that the stages balance, as the bubble formula assumes equal stages: the LM
# head (6·Vp·C = 18.9 MFLOP per token) costs about 1.6 blocks (6·12·C² + 12·T·C = 11.8), so
# the last stage carries fewer blocks.
declare -A LAYERS=([2]=12 [4]=11) SPLIT=([2]="7,5" [4]="3,3,3,2")
for stages in 2 4; do
  for micro in 4 8; do
    name="pipeline${stages}_m${micro}"
    run "$name" "$stages" --parallel.pipeline="$stages" --train.global_batch="$micro" --train.micro_batch=1 \
      --model.layers="${LAYERS[$stages]}" --parallel.stage_layers="${SPLIT[$stages]}"
    grep -h 'pipeline bubble' "$OUT/$name.log" | sed "s/^/p=$stages m=$micro: /"
  done
done
