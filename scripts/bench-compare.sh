#!/usr/bin/env bash
# bench-compare.sh OLD_BINARY [NEW_BINARY] — two builds of trident side by side, alternating
# round by round so that both see the same machine (timings here drift by 10% and more between
# minutes): one rank's training step in fp32 and bf16 (trident bench on inputs/bench-s.deck,
# 2 threads) and a 4-rank (tensor 2 x data 2) and an 8-rank (2,2,2) ZeRO-1 run (median step
# time after the first step). Prints each figure's median over the rounds and new/old.
# Used for the redesign of issue 15 ("make bench figures within noise of before").
set -euo pipefail
OLD=${1:?usage: bench-compare.sh OLD_BINARY [NEW_BINARY]}
NEW=${2:-build/bin/trident}
ROUNDS=${ROUNDS:-5}
. scripts/mpi-env.sh
OUT=$(mktemp -d /tmp/trident-bench-compare.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
"$NEW" prepare "$OUT/data" /usr/share/common-licenses/{GPL-3,GPL-2,LGPL-2.1,Apache-2.0,GFDL-1.3} > /dev/null
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
median_step_ms() {  # median step_ms of a run after its first step
  /usr/bin/python3 -c "import h5py,numpy,sys; print(numpy.median(h5py.File(sys.argv[1]+'/metrics.h5','r')['step_ms'][1:]))" "$1"
}
run_parallel() {  # run_parallel BIN NAME RANKS OVERRIDES...
  local bin=$1 name=$2 ranks=$3
  shift 3
  OMP_NUM_THREADS=1 mpirun -np "$ranks" "$bin" train inputs/bench-s.deck --train.run_dir="$OUT/$name" \
    --train.steps=8 --train.eval_interval=0 --train.eval_tokens=1024 --checkpoint.at_end=false \
    --data.train="$OUT/data/train.bin" --data.val="$OUT/data/val.bin" "$@" > "$OUT/$name.log" 2>&1
  median_step_ms "$OUT/$name"
  rm -rf "${OUT:?}/$name"
}
declare -A values
for round in $(seq "$ROUNDS"); do
  for which in old new; do
    bin=$([[ $which == old ]] && echo "$OLD" || echo "$NEW")
    line=$(OMP_NUM_THREADS=2 "$bin" bench inputs/bench-s.deck --steps=5)
    values[$which.fp32_tok_s]+="$(echo "$line" | field tokens_per_s) "
    line=$(OMP_NUM_THREADS=2 "$bin" bench inputs/bench-s.deck --compare=bf16 --steps=5)
    values[$which.bf16_step_ms]+="$(echo "$line" | field bf16_step_ms) "
    values[$which.tp2dp2_step_ms]+="$(run_parallel "$bin" "$which-tp2dp2" 4 --parallel.tensor=2 --parallel.data=2 --train.global_batch=8 --train.micro_batch=2) "
    values[$which.tp2pp2dp2_zero1_step_ms]+="$(run_parallel "$bin" "$which-222" 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1 --train.global_batch=8 --train.micro_batch=2) "
  done
  echo "round $round of $ROUNDS done" >&2
done
printf '%-26s %12s %12s %9s\n' figure old new new/old
for figure in fp32_tok_s bf16_step_ms tp2dp2_step_ms tp2pp2dp2_zero1_step_ms; do
  /usr/bin/python3 - "$figure" "${values[old.$figure]}" "${values[new.$figure]}" <<'PY'
import statistics, sys
name, old, new = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
mo, mn = statistics.median(old), statistics.median(new)
spread = lambda xs: (max(xs) - min(xs)) / statistics.median(xs) * 100
print(f"{name:<26} {mo:12.1f} {mn:12.1f} {mn / mo:8.3f}x   (spread old {spread(old):.0f}%, new {spread(new):.0f}%)")
PY
done
