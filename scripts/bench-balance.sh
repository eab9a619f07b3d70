#!/usr/bin/env bash
# bench-balance.sh — the load-balance part of `make bench` (docs/PERFORMANCE.md, issue 18): a
# slowed pipeline stage (p = 2, and p = 4 with 16 blocks, so that one block is a fine enough
# step; one stage at 2x by debug.slowdown) and a slowed data replica (d = 2, one at 1.5x), each
# run three ways in one run of this script — unslowed, slowed and static, slowed with
# rebalancing (balance.pipeline / balance.replicas) — with the throughput and the pipeline
# bubble of the steady state (the median step of the second half of the run, after any move)
# and the share of the slowdown's cost that rebalancing recovered; then
# the micro-batch count's rules (balance.micro_batches) side by side.
set -euo pipefail
. scripts/mpi-env.sh
BIN=$(realpath "${BIN:-build/bin/trident}")
STEPS=${BENCH_STEPS:-40}
ROUNDS=${BENCH_ROUNDS:-3}
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/trident-bench-balance.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
"$BIN" prepare "$WORK/data" /usr/share/common-licenses/GPL-3 > /dev/null
cat > "$WORK/b.deck" <<DECK
[model]
layers = 8
heads = 4
hidden = 128
vocab = 256
seq_len = 64
[train]
steps = $STEPS
global_batch = 16
micro_batch = 1
eval_interval = 0
eval_tokens = 1024
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
[checkpoint]
at_end = false
[balance]
interval = 5
DECK
# A core per rank where the host has as many: unbound, two ranks on two cores were measured to
# run 1.5x apart for seconds (both on one core), which is noise to every figure below.
bind() { if (( $1 <= $(getconf _NPROCESSORS_ONLN) )); then echo "--bind-to core"; else echo "--bind-to none"; fi; }
# steady NAME...: "tokens/s bubble% split shares" — per run the median step of the second half
# of its steps; over the runs (the rounds of one case) the median; split and shares of the last.
steady() {
  $PY - "${@/#/$WORK/}" <<'PY'
import sys, h5py, numpy as np
tps, bubbles = [], []
for path in sys.argv[1:]:
    f = h5py.File(path + "/metrics.h5", "r")
    half = len(f["step"]) // 2
    tps.append(np.median(f["tokens_per_s"][half:]))
    stages = sorted(k for k in f.keys() if k.startswith("stage") and k[5:].isdigit())
    if stages:
        phase = np.max([f[s + "/schedule_ms"][half:] for s in stages], axis=0)
        bubbles.append(np.mean([f[s + "/bubble_ms"][half:] / phase for s in stages]))
    else:
        bubbles.append(0.0)
split = ",".join(str(f[f"balance/{s}/blocks"][-1]) for s in stages) if stages and "balance/stage0/blocks" in f else "-"
shares = ",".join(str(f[f"balance/replica{d}/micro_batches"][-1]) for d in range(2)) if "balance/replica0/micro_batches" in f else "-"
print(f"{np.median(tps):.0f} {100 * np.median(bubbles):.1f} {split} {shares}")
PY
}
# train RANKS RUN_DIR ARGS...: one run of the bench deck, a core per rank where there are enough.
train() {
  local ranks=$1 dir=$2
  shift 2
  # shellcheck disable=SC2046
  (cd "$WORK" && mpirun $(bind "$ranks") -np "$ranks" "$BIN" train b.deck --train.run_dir="$dir" "$@" > "$dir.out" 2>&1)
}
# case LABEL RANKS "LAYOUT" "SLOWDOWN" "BALANCE": the three kinds of run, ROUNDS times in turn
# (this host's speed drifts by tens of percent over minutes: interleaved rounds see the same
# drift), and one table row of their medians.
case_row() {
  local label=$1 ranks=$2 layout=$3 slow=$4 balance=$5 name=${1//[^a-z0-9]/_} round
  for round in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086
    train "$ranks" "${name}_base_$round" $layout
    # shellcheck disable=SC2086
    train "$ranks" "${name}_slow_$round" $layout --debug.slowdown="$slow"
    # shellcheck disable=SC2086
    train "$ranks" "${name}_rebalanced_$round" $layout --debug.slowdown="$slow" $balance
  done
  read -r base base_bubble _ _ <<< "$(steady $(printf "${name}_base_%s " $(seq "$ROUNDS")))"
  read -r slow slow_bubble _ _ <<< "$(steady $(printf "${name}_slow_%s " $(seq "$ROUNDS")))"
  read -r rebal rebal_bubble split shares <<< "$(steady $(printf "${name}_rebalanced_%s " $(seq "$ROUNDS")))"
  local after=$split; [[ $balance == *replicas* ]] && after=$shares
  printf '  %-30s %9.0f %9.0f %11.0f %9.0f%% %9.0f%% %7.1f%% %7.1f%%  %s\n' "$label" "$base" "$slow" "$rebal" \
    "$(echo "100 * ($rebal - $slow) / ($base - $slow)" | bc -l)" \
    "$(echo "100 * (1 / $slow - 1 / $rebal) / (1 / $slow - 1 / $base)" | bc -l)" "$slow_bubble" "$rebal_bubble" "$after"
}
echo "load balance: 8 blocks, hidden 128, seq_len 64, 16 micro-batches of 1 per step, 1 thread per rank;"
echo "tokens/s = median of the second half of $STEPS steps, median of $ROUNDS interleaved rounds;"
echo "recovered, of tokens/s: (rebalanced - slowed) / (unslowed - slowed); of the time per token: the same of 1/tokens/s"
printf '  %-30s %9s %9s %11s %10s %10s %8s %8s  %s\n' case unslowed slowed rebalanced "recovered" "(time)" "bubble" \
  "after" "split/shares"
case_row "p=2, stage 1 at 2x" 2 "--parallel.pipeline=2" "1:2" "--balance.pipeline=true"
case_row "p=4, 16 blocks, stage 1 at 2x" 4 "--parallel.pipeline=4 --model.layers=16" "1:2" "--balance.pipeline=true"
case_row "d=2, replica 1 at 1.5x" 2 "--parallel.data=2" "1:1.5" "--balance.replicas=true"
echo "  (bubble: share of the pipeline phase a stage does not compute, mean of the stages; slowed static, then rebalanced)"

# The micro-batch count (balance.micro_batches): one layout run three ways — the deck's count
# (fixed), the seed's §4.1 rule, the fitted step model, ROUNDS times in turn — with the medians
# and the count each ended on (in the last round).
# count_row LABEL RANKS "LAYOUT AND SLOWDOWN"
count_row() {
  local label=$1 ranks=$2 layout=$3 name=count_${1//[^a-z0-9]/_} cells="" rule round
  for round in $(seq "$ROUNDS"); do
    for rule in fixed seed model; do
      # shellcheck disable=SC2086
      train "$ranks" "${name}_${rule}_$round" $layout --balance.micro_batches=$rule
    done
  done
  for rule in fixed seed model; do
    read -r tps bubble _ _ <<< "$(steady $(printf "${name}_${rule}_%s " $(seq "$ROUNDS")))"
    local count
    count=$($PY - "$WORK/${name}_${rule}_$ROUNDS/metrics.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
m = f["balance/micro_batches"][-1] if "balance/micro_batches" in f else None
print(f"{m}x{f['balance/micro_batch'][-1]}" if m is not None else "deck's")
PY
)
    cells+=$(printf ' %7.0f %5.1f%% %-7s' "$tps" "$bubble" "$count")
  done
  printf '  %-28s%s\n' "$label" "$cells"
}
echo
echo "micro-batch count: tokens/s, bubble, and the count x size it ended on; 16 sequences a step"
printf '  %-28s %-23s %-23s %-23s\n' case "fixed" "seed (4.1 as written)" "model"
count_row "p=2, 2 x 8, balanced" 2 "--parallel.pipeline=2 --train.micro_batch=8"
count_row "p=2, 16 x 1, balanced" 2 "--parallel.pipeline=2"
count_row "p=2, 2 x 8, stage 1 at 2x" 2 "--parallel.pipeline=2 --train.micro_batch=8 --debug.slowdown=1:2"
count_row "p=2, 16 x 1, stage 1 at 2x" 2 "--parallel.pipeline=2 --debug.slowdown=1:2"
count_row "p=4, 4 x 4, stage 1 at 2x" 4 "--parallel.pipeline=4 --train.micro_batch=4 --debug.slowdown=1:2"
