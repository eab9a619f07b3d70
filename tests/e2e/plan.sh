#!/usr/bin/env bash
# `trident plan`: one process, nothing model-sized allocated — 175B on 1024 GPUs answers in
# seconds; --json is one valid object per layout with the promised fields; the seed's §5.2
# audit says the claim is impossible and the claimed layout does not fit; --emit-deck writes a
# deck that trains; bad input exits 2 with one error line. Then the measured-vs-predicted check
# on this host: calibrate, train 9 layouts of 8 ranks, compare.
. tests/e2e/lib.sh
PLAN_DECKS="$ROOT/inputs"
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3

# 175B on 1024 A100s: seconds and a small resident set, in one process without mpirun.
start=$(date +%s%N)
if /usr/bin/time -f '%M' -o rss.txt "$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx \
    --gpus=1024 > big.out 2> big.err; then
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  rss_mb=$(( $(tail -1 rss.txt) / 1024 ))
  if (( ms < 30000 && rss_mb < 500 )) && grep -q "fit in memory" big.out; then
    pass "plan_175b_1024_gpus (${ms} ms, ${rss_mb} MB resident)"
  else fail "plan_175b_1024_gpus" "${ms} ms, ${rss_mb} MB: $(tail -3 big.out)"; fi
else fail "plan_175b_1024_gpus" "$(tail -3 big.err)"; fi

# ZeRO stages (issue 33): the seed's 175B, tensor 8 x data 4 in bf16 — the distributed
# optimizer's state is 2 + 4 + 12/4 = 9 bytes per parameter of the rank's 21.8 B (~197 GB)
# against 2 + 4 + 12 = 18 (its master unsharded); on 256 A100s the per-stage summary says how
# many layouts fit with each stage, the distributed optimizer more.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --optim.zero=1 > zero1.out 2>&1
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --gpus=256 > stages.out 2>&1
if $PY - zero1.out stages.out > stages.cmp 2>&1 <<'PY'
import re, sys
text = open(sys.argv[1]).read()
g, o, p = (float(re.search(k + r" ([0-9.]+) GB", text).group(1)) for k in ("gradients", "optimizer", "parameters"))
n = 174.56e9 / 8  # the rank's parameters, in round figures (the tensor slice of everything but the embeddings)
stages = dict(re.findall(r"optim.zero = ([01])[^:]*: ([0-9]+) of [0-9]+ layouts fit", open(sys.argv[2]).read()))
print(f"t8 d4 ZeRO-1 state {g + o + p:.1f} GB = {(g + o + p) * 1e9 / n:.2f} bytes per parameter "
      f"(optimizer {o} GB); layouts that fit on 256 GPUs: {stages}")
ok = abs((g + o + p) * 1e9 / n - 9) < 0.1 and abs(o * 1e9 / n - 3) < 0.05
sys.exit(0 if ok and set(stages) == {"0", "1"} and int(stages["1"]) > int(stages["0"]) else 1)
PY
then pass "plan_zero_stages ($(cat stages.cmp))"; else fail plan_zero_stages "$(cat stages.cmp)"; fi

# --json: every line one object with the fields the issue names; feasible ones ranked by tokens/s.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=h100-80gb-dgx --gpus=256 --json > plan.jsonl 2> json.err
if $PY - plan.jsonl > json.cmp 2>&1 <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
need = ["tensor", "context", "pipeline", "data", "micro_batch", "sequence_parallel", "tp_comm_overlap", "feasible",
        "memory_bytes", "step_time_s", "tokens_per_s", "tflops_per_device", "mfu", "reason", "scaling_efficiency"]
for r in rows:
    missing = [k for k in need if k not in r]
    if missing: sys.exit(print(f"missing {missing} in {r}") or 1)
    if r["tensor"] * r["context"] * r["pipeline"] * r["data"] != r["devices"]: sys.exit(print(f"bad layout {r}") or 1)
    # Per category the largest over ranks; the total is the busiest rank's: at most their sum.
    parts = [v for k, v in r["memory_bytes"].items() if k != "total"]
    if not max(parts) <= r["memory_bytes"]["total"] <= sum(parts):
        sys.exit(print(f"categories and total disagree: {r['memory_bytes']}") or 1)
    if not r["feasible"] and "more than the device" not in r["reason"]: sys.exit(print(f"no reason: {r}") or 1)
search = [r for r in rows if r["source"] == "search"]
fit = [r for r in search if r["feasible"]]
if not fit: sys.exit(print("nothing fits 256 H100s") or 1)
rates = [r["tokens_per_s"] for r in fit]
if rates != sorted(rates, reverse=True): sys.exit(print("not ranked by tokens/s") or 1)
if search[:len(fit)] != fit: sys.exit(print("feasible layouts are not first") or 1)
print(f"{len(rows)} objects, {len(fit)} fit; best {fit[0]['tensor']}x{fit[0]['pipeline']}x{fit[0]['data']} "
      f"{fit[0]['tokens_per_s']:.0f} tokens/s, MFU {100 * fit[0]['mfu']:.0f}%")
PY
then pass "plan_json ($(cat json.cmp))"; else fail "plan_json" "$(cat json.cmp) $(head -c 300 json.err)"; fi

# The seed's §5.2: 680 samples/s on 32 DGX A100 is above the peak, and tensor 8 x data 4 does not fit.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --gpus=256 --audit samples_per_s=680 > audit.out 2>&1
if grep -q "IMPOSSIBLE: above the peak" audit.out && grep -q "claimed layout.*DOES NOT FIT" audit.out &&
   grep -q "18.8 x the peak" audit.out; then
  pass "plan_seed_audit ($(grep -o '[0-9.]* x the peak' audit.out))"
else fail "plan_seed_audit" "$(grep -A6 '^audit' audit.out)"; fi

# The scaling curve over a range, with the seed's rule beside it.
"$TRIDENT" plan "$PLAN_DECKS/bench-124m.deck" --hardware=h200 --gpus=1-64 --train.global_batch=64 > curve.out 2>&1
if grep -q "^scaling:" curve.out && grep -q "seed §2.1" curve.out && grep -q "model's best device count" curve.out &&
   [[ $(grep -cE '^ +(1|2|4|8|16|32|64) ' curve.out) -ge 7 ]]; then
  pass "plan_scaling_curve"
else fail "plan_scaling_curve" "$(tail -20 curve.out)"; fi

# --plot: the same curve as a PNG (libpng) that a reader decodes: 640x400 RGB, white ground, the
# curve's blue points drawn.
"$TRIDENT" plan "$PLAN_DECKS/bench-124m.deck" --hardware=h200 --gpus=1-64 --train.global_batch=64 \
  --plot=curve.png > plot.out 2>&1
if $PY - curve.png > plot.cmp 2>&1 <<'PY'
import sys
import matplotlib.image as mpimg
image = mpimg.imread(sys.argv[1])  # float RGB in [0, 1]
assert image.shape == (400, 640, 3), image.shape
pixels = (image * 255).round().astype(int).reshape(-1, 3).tolist()
assert pixels.count([255, 255, 255]) > 0.8 * len(pixels), "not a white ground"
assert pixels.count([30, 90, 200]) > 50, "no curve drawn"
PY
then pass "plan_plot_png_decodes"; else fail "plan_plot_png_decodes" "$(cat plot.out plot.cmp | tail -5)"; fi

# --emit-deck: the best layout for 4 ranks of this host, written as a deck that trains.
write_deck small.deck '[topology]
ranks_per_node = 2'
if "$TRIDENT" plan small.deck --hardware=a100-80gb-dgx --gpus=4 --emit-deck=best.deck > emit.out 2>&1 &&
   grep -q "^tensor = \|^\[parallel\]" best.deck &&
   timeout 120 mpirun -q -np 4 "$TRIDENT" train best.deck --train.run_dir=emitted > emitted.out 2>&1 &&
   [[ -f emitted/metrics.h5 ]]; then
  pass "plan_emit_deck ($(sed -n 's/^wrote best.deck (\(.*\))/\1/p' emit.out))"
else fail "plan_emit_deck" "$(tail -3 emit.out) $(tail -3 emitted.out 2>/dev/null)"; fi

# Bad input: exit 2, one error line naming the problem.
expect_user_error plan_unknown_profile "hardware profile|this-host" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --hardware=nosuch
expect_user_error plan_bad_gpus "--gpus" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --gpus=zero
expect_user_error plan_bad_audit "samples_per_s" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --audit tokens=5
expect_user_error plan_missing_deck "deck" "$TRIDENT" plan nosuch.deck
expect_user_error plan_bad_key "unknown option" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --parallel.tensr=2
printf '[device]\nname = x\nmemory_gb = -1\n' > bad.ini
expect_user_error plan_bad_profile "bad.ini|memory_gb" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --hardware="$WORK/bad.ini"

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
