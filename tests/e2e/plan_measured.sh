#!/usr/bin/env bash
# tier: long
# The planner's step time against training runs on this host (a timing measurement, so in
# `make test-long`): calibrate, train 9 layouts, compare each median step with the prediction.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3

# Measured against predicted on this host, with a core per rank (the step model's devices are
# independent; 8 ranks on 2 cores are not: a rank waiting in a bubble or a collective gives its
# core to the others, docs/DECISIONS.md, "The planner"): an emulated cluster of 8 ranks
# (4 nodes of 2 in 2 racks) where the host has 8 cores, else 2 ranks on two emulated racks, the
# links slowed by the link model in both. Calibrated in this test (commbench's links.ini and the
# GEMM probe), then 9 layouts trained for a few steps; the median step (steps 2 on) against the
# planner's step_time_s. At least 8 of the 9 must be within PLAN_TOLERANCE (the issue's target).
cores=$(getconf _NPROCESSORS_ONLN)  # not nproc: it follows OMP_NUM_THREADS
if (( cores >= 8 )); then
  ranks=8 topology="ranks_per_node = 2
nodes_per_rack = 2" parallel="tensor = 2
pipeline = 2
data = 2"
  layouts=(
    "t2p2d2 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2"
    "d8 --parallel.tensor=1 --parallel.pipeline=1 --parallel.data=8"
    "d8_zero --parallel.tensor=1 --parallel.pipeline=1 --parallel.data=8 --optim.zero=1"
    "t8 --parallel.tensor=8 --parallel.pipeline=1 --parallel.data=1"
    "p8 --parallel.tensor=1 --parallel.pipeline=8 --parallel.data=1 --train.micro_batch=1"
    "t2p2d2_full --memory.recompute=full"
    "t2p2d2_bf16 --optim.precision=bf16"
    "t4p2_gpipe_selective --parallel.tensor=4 --parallel.pipeline=2 --parallel.data=1 --parallel.schedule=gpipe --memory.recompute=selective"
    "t2d4_flat --parallel.tensor=2 --parallel.pipeline=1 --parallel.data=4 --comm.algo=flat"
  )
else
  ranks=2 topology="ranks_per_node = 1
nodes_per_rack = 1" parallel="data = 2"
  layouts=(
    "d2 --parallel.data=2"
    "d2_zero --parallel.data=2 --optim.zero=1"
    "t2 --parallel.tensor=2 --parallel.data=1"
    "p2 --parallel.pipeline=2 --parallel.data=1 --train.micro_batch=1"
    "t2_full --parallel.tensor=2 --parallel.data=1 --memory.recompute=full"
    "d2_bf16 --parallel.data=2 --optim.precision=bf16"
    "p2_gpipe_selective --parallel.pipeline=2 --parallel.data=1 --parallel.schedule=gpipe --memory.recompute=selective"
    "d2_flat --parallel.data=2 --comm.algo=flat"
    "t2_bf16 --parallel.tensor=2 --parallel.data=1 --optim.precision=bf16"
  )
fi
cat > m.deck <<DECK
[model]
layers = 8
heads = 8
hidden = 256
vocab = 256
seq_len = 128
[parallel]
$parallel
[topology]
$topology
link.node = 20,1
link.rack = 100,0.25
link.cross_rack = 200,0.1
[train]
global_batch = 16
micro_batch = 2
steps = 7
eval_tokens = 1024
run_dir = calib
[checkpoint]
at_end = false
[metrics]
log_interval = 1
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
DECK
PLAN_TOLERANCE=${PLAN_TOLERANCE:-0.20}
if (( cores < 2 )); then
  skip plan_measured_vs_predicted "one core: no layout of two ranks has a core per rank"
elif ! timeout 300 mpirun -q $(bind_to "$ranks") -np "$ranks" "$TRIDENT" commbench m.deck > commbench.out 2>&1 ||
     ! "$TRIDENT" plan m.deck --calibrate="$WORK/host.ini" > calibrate.out 2>&1; then
  fail "plan_calibrate" "$(tail -3 commbench.out) $(tail -3 calibrate.out)"
else
  pass "plan_calibrate ($ranks ranks; $(grep -E '^peak_tflops_fp32|^memory_bandwidth_gbps' host.ini | cut -d'#' -f1 | tr -s ' \n' ' '))"
  # measure_layout NAME TRY OVERRIDES...: this host's GEMM and element-wise rates probed again
  # right before the run (a shared host's speed drifts by tens of percent over a minute: the
  # prediction uses the rates of the moment it is compared with; the links stay commbench's),
  # the prediction, the run, and "predicted X ms, measured Y ms (+E%)" in NAME.cmp; true when
  # within PLAN_TOLERANCE.
  measure_layout() {
    local name=$1 try=$2 predicted
    shift 2
    "$TRIDENT" plan m.deck --calibrate="$WORK/host-$name.ini" > "calibrate-$name.out" 2>&1 ||
      { echo "calibration failed: $(tail -1 "calibrate-$name.out")" > "$name.cmp"; return 1; }
    predicted=$("$TRIDENT" plan m.deck --hardware="$WORK/host-$name.ini" --json "$@" | head -1)
    # shellcheck disable=SC2046
    if ! timeout 300 mpirun -q $(bind_to "$ranks") -np "$ranks" "$TRIDENT" train m.deck --train.run_dir="run_$name$try" "$@" > "$name$try.out" 2>&1; then
      echo "run failed: $(tail -2 "$name$try.out")" > "$name.cmp"; return 1
    fi
    $PY - "run_$name$try/metrics.h5" "$predicted" "$PLAN_TOLERANCE" > "$name.cmp" 2>&1 <<'PY'
import json, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
plan, tolerance = json.loads(sys.argv[2]), float(sys.argv[3])
measured = float(np.median(f["step_ms"][1:])) / 1e3  # the first step warms up
predicted = plan["step_time_s"]
error = predicted / measured - 1
print(f"predicted {1e3 * predicted:.0f} ms, measured {1e3 * measured:.0f} ms ({100 * error:+.0f}%)")
sys.exit(0 if abs(error) <= tolerance else 1)
PY
  }
  # A layout outside the tolerance is measured once more, probe and run: a modelling error
  # repeats, a minute when another process had a core does not. Both figures are reported.
  within=0 figures=""
  for entry in "${layouts[@]}"; do
    read -r name overrides <<< "$entry"
    # shellcheck disable=SC2086
    if measure_layout "$name" "" $overrides; then
      within=$((within + 1)) figures+="; $name $(cat "$name.cmp")"
      continue
    fi
    first=$(cat "$name.cmp")
    # shellcheck disable=SC2086
    measure_layout "$name" _again $overrides && within=$((within + 1))
    figures+="; $name $first, again $(cat "$name.cmp")"
  done
  if (( within >= ${#layouts[@]} - 1 )); then
    pass "plan_measured_vs_predicted ($within of ${#layouts[@]} within $PLAN_TOLERANCE${figures})"
  else
    fail "plan_measured_vs_predicted" "$within of ${#layouts[@]} within $PLAN_TOLERANCE, at least $(( ${#layouts[@]} - 1 )) needed${figures}"
  fi
fi
