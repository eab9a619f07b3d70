#!/usr/bin/env bash
# bench-long-context.sh — context parallelism in `make bench` (docs/PERFORMANCE.md, issue 34):
# the longest sequence bench-s's model (bf16, flash attention, the chunked classifier, the
# cheapest recompute that fits) trains within 4 GB per rank, on one rank and on 8 ranks of
# context parallelism (c = 8, with the distributed optimizer over them). The verdict is the
# memory model's — the one `trident train` checks memory.budget_gb against, held to the tracked
# peaks of real runs by tests/e2e/memory.sh — through `trident plan` with a 4 GB device
# (--hardware): `train --check` would allocate each rank's model, 8 × 4 GB, more than this
# host has, and no step of a 200K-token sequence runs on 2 cores. Lengths are multiples of 2048
# tokens, found by doubling and then bisection.
set -euo pipefail
BIN=${BIN:-build/bin/trident}
OUT=${BENCH_DIR:-runs/bench-long-context}
BUDGET=${BENCH_BUDGET_GB:-4}
UNIT=2048
mkdir -p "$OUT"
sed "s/^memory_gb = .*/memory_gb = $BUDGET/; s/^name = .*/name = a $BUDGET GB device/" inputs/hardware/h200.ini > "$OUT/device.ini"
fits() {  # fits CONTEXT UNITS: exit 0 when some recompute mode fits; its name in $OUT/mode
  local T=$(( $2 * UNIT )) mode
  for mode in none selective full; do
    "$BIN" plan inputs/bench-s.deck --hardware="$OUT/device.ini" --gpus="$1" --json --top=1 --model.seq_len=$T \
      --train.micro_batch=1 --train.global_batch=8 --optim.precision=bf16 --model.attention=flash \
      --model.classifier_chunk=256 --parallel.context="$1" --optim.zero=$(( $1 > 1 ? 1 : 0 )) \
      --memory.recompute=$mode > "$OUT/c$1_$2_$mode.json" 2> "$OUT/c$1_$2_$mode.err" ||
      { echo "plan of $T tokens, context $1 failed: $(head -c 300 "$OUT/c$1_$2_$mode.err")" >&2; exit 1; }
    if head -1 "$OUT/c$1_$2_$mode.json" | grep -q '"feasible":true'; then echo "$mode" > "$OUT/mode_$1_$2"; return 0; fi
  done
  return 1
}
longest() {  # longest CONTEXT: the most units that fit
  local lo=0 hi=1
  while fits "$1" "$hi"; do lo=$hi; hi=$((hi * 2)); [[ $hi -gt 4096 ]] && break; done
  while (( hi - lo > 1 )); do
    local mid=$(( (lo + hi) / 2 ))
    if fits "$1" "$mid"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}
one=$(longest 1)
eight=$(longest 8)
memory() { sed -n 's/.*"memory_bytes":{\([^}]*\)}.*/\1/p' "$OUT/c$1_$2_$(cat "$OUT/mode_$1_$2").json" | head -1; }
echo "long_context at $BUDGET GB per rank: 1 rank $((one * UNIT)) tokens (recompute $(cat "$OUT/mode_1_$one")), 8 ranks" \
     "with context 8 $((eight * UNIT)) tokens (recompute $(cat "$OUT/mode_8_$eight")): $(awk -v a="$eight" -v b="$one" 'BEGIN { printf "%.2f", a / b }')x"
echo "long_context memory of the longest, bytes: 1 rank {$(memory 1 "$one")}; context 8 {$(memory 8 "$eight")}"
