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
# steady NAME: "tokens/s bubble%" of the second half of NAME's steps (median step time).
steady() {
  $PY - "$WORK/$1" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1] + "/metrics.h5", "r")
half = len(f["step"]) // 2
tps = np.median(f["tokens_per_s"][half:])
stages = sorted(k for k in f.keys() if k.startswith("stage") and k[5:].isdigit())
if stages:
    phase = np.max([f[s + "/schedule_ms"][half:] for s in stages], axis=0)
    bubble = np.mean([f[s + "/bubble_ms"][half:] / phase for s in stages])
else:
    bubble = 0.0
split = ",".join(str(f[f"balance/{s}/blocks"][-1]) for s in stages) if stages and "balance/stage0/blocks" in f else "-"
shares = ",".join(str(f[f"balance/replica{d}/micro_batches"][-1]) for d in range(2)) if "balance/replica0/micro_batches" in f else "-"
print(f"{tps:.0f} {100 * bubble:.1f} {split} {shares}")
PY
}
# case LABEL RANKS "LAYOUT" "SLOWDOWN" "BALANCE": the three runs and one table row.
case_row() {
  local label=$1 ranks=$2 layout=$3 slow=$4 balance=$5 name=${1// /_}
  for kind in base slow rebalanced; do
    local extra=""
    [[ $kind != base ]] && extra="--debug.slowdown=$slow"
    [[ $kind == rebalanced ]] && extra="$extra $balance"
    (cd "$WORK" && mpirun -np "$ranks" "$BIN" train b.deck --train.run_dir="${name}_$kind" $layout $extra > "${name}_$kind.out" 2>&1)
  done
  read -r base base_bubble _ _ <<< "$(steady "${name}_base")"
  read -r slow slow_bubble _ _ <<< "$(steady "${name}_slow")"
  read -r rebal rebal_bubble split shares <<< "$(steady "${name}_rebalanced")"
  local after=$split; [[ $balance == *replicas* ]] && after=$shares
  printf '  %-26s %9.0f %9.0f %11.0f %9.0f%% %7.1f%% %7.1f%%  %s\n' "$label" "$base" "$slow" "$rebal" \
    "$(echo "100 * ($rebal - $slow) / ($base - $slow)" | bc -l)" "$slow_bubble" "$rebal_bubble" "$after"
}
echo "load balance: 8 blocks, hidden 128, seq_len 64, 16 micro-batches of 1 per step, 1 thread per rank;"
echo "tokens/s = median of the second half of $STEPS steps; recovered = (rebalanced - slowed) / (unslowed - slowed)"
printf '  %-26s %9s %9s %11s %10s %8s %8s  %s\n' case unslowed slowed rebalanced recovered "bubble" "after" "split/shares"
case_row "p=2, stage 1 at 2x" 2 "--parallel.pipeline=2" "1:2" "--balance.pipeline=true"
case_row "p=4, 16 blocks, stage 1 at 2x" 4 "--parallel.pipeline=4 --model.layers=16" "1:2" "--balance.pipeline=true"
case_row "d=2, replica 1 at 1.5x" 2 "--parallel.data=2" "1:1.5" "--balance.replicas=true"
echo "  (bubble: share of the pipeline phase a stage does not compute, mean of the stages; slowed static, then rebalanced)"

# The micro-batch count (balance.micro_batches): one layout run three ways — the deck's count
# (fixed), the seed's §4.1 rule, the fitted step model — with the count each ended on.
# count_row LABEL RANKS "LAYOUT AND SLOWDOWN"
count_row() {
  local label=$1 ranks=$2 layout=$3 name=count_${1//[^a-z0-9]/_} cells=""
  for rule in fixed seed model; do
    (cd "$WORK" && mpirun -np "$ranks" "$BIN" train b.deck --train.run_dir="${name}_$rule" $layout \
      --balance.micro_batches=$rule > "${name}_$rule.out" 2>&1)
    read -r tps bubble _ _ <<< "$(steady "${name}_$rule")"
    local count
    count=$($PY -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); print(f'{f[\"balance/micro_batches\"][-1]}x{f[\"balance/micro_batch\"][-1]}' if 'balance/micro_batches' in f else '-')" "$WORK/${name}_$rule/metrics.h5")
    cells+=$(printf ' %7.0f %5.1f%% %-6s' "$tps" "$bubble" "$count")
  done
  printf '  %-30s%s\n' "$label" "$cells"
}
echo
echo "micro-batch count: tokens/s, bubble and the count x size it ended on (fixed = the deck's), same 16 sequences a step"
printf '  %-30s %-22s %-22s %-22s\n' case "fixed" "seed (4.1 as written)" "model"
count_row "p=4, 4 x 4, balanced" 4 "--parallel.pipeline=4 --train.micro_batch=4"
count_row "p=4, 4 x 4, stage 1 at 2x" 4 "--parallel.pipeline=4 --train.micro_batch=4 --debug.slowdown=1:2"
count_row "p=2, 16 x 1, stage 1 at 2x" 2 "--parallel.pipeline=2 --debug.slowdown=1:2"
