#!/usr/bin/env bash
# bench-attention.sh — issue 32's CPU targets in `make bench` (docs/PERFORMANCE.md): GPT-2 124M
# (inputs/bench-124m.deck) at T = 1024 with micro-batches of 4 sequences on one rank, in fp32 and
# bf16, the attention and head as before the issue (materialized attention, whole logits) beside
# the defaults (flash attention, chunked classifier), alternating round by round so that both
# see the same machine: the tracked peak of activation memory and the step time (median of the
# rounds). Then the longest context whose estimate fits memory.budget_gb = 4 on one rank at the
# default deck's width, each way (the memory model is exact: tests/e2e/memory.sh).
#   OLD=path/to/an/older/trident adds that binary's default path as a third column.
#   BENCH_LOSS_STEPS=20 also trains GPT-2 124M for that many fp32 steps each way (B = 4, T = 1024,
#   random tokens; ≈ 10 minutes on 2 cores) and prints the largest relative difference of the
#   losses (the issue's "same losses": 1e-5), the median steps and the tracked activations.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
ROUNDS=${BENCH_ROUNDS:-2}
B=${BENCH_MICRO_BATCH:-4}
export OMP_NUM_THREADS=${BENCH_THREADS:-2}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
before=(--model.attention=materialized --model.classifier_chunk=0)
declare -A ms mib
step() {  # step KEY BINARY PRECISION OVERRIDES...: one bench run, its step ms and peak activations kept
  local key=$1 bin=$2 precision=$3
  shift 3
  local line
  line=$("$bin" bench inputs/bench-124m.deck --no-gemm --steps=1 --warmup=1 --train.micro_batch="$B" \
    --train.global_batch="$B" --optim.precision="$precision" "$@")
  ms[$key]+="$(echo "$line" | field step_ms) "
  mib[$key]=$(echo "$line" | field activations_mib)
}
for round in $(seq "$ROUNDS"); do
  for precision in fp32 bf16; do
    step "before.$precision" "$BIN" "$precision" "${before[@]}"
    step "after.$precision" "$BIN" "$precision"
    if [[ -n ${OLD:-} ]]; then step "old.$precision" "$OLD" "$precision"; fi
  done
done
echo "GPT-2 124M, $B x 1024 tokens, one rank, $OMP_NUM_THREADS threads, median step of $ROUNDS alternating rounds:"
printf '  %-6s %-42s %16s %10s %10s %10s\n' "" path "activations MiB" change "step ms" change
for precision in fp32 bf16; do
  base_mib=${mib[before.$precision]} base_ms=$(echo "${ms[before.$precision]}" | median)
  for key in before after old; do
    [[ -n ${mib[$key.$precision]:-} ]] || continue
    case $key in
      before) label="materialized attention, whole logits" ;;
      after) label="flash attention, chunked classifier" ;;
      old) label="OLD binary, its defaults" ;;
    esac
    m=$(echo "${ms[$key.$precision]}" | median)
    printf '  %-6s %-42s %16.0f %9.1f%% %10.0f %9.1f%%\n' "$precision" "$label" "${mib[$key.$precision]}" \
      "$(echo "100 * (${mib[$key.$precision]} / $base_mib - 1)" | bc -l)" "$m" "$(echo "100 * ($m / $base_ms - 1)" | bc -l)"
  done
done
echo "  (targets: activations at least 40% below the first row of each precision, the step not slower)"

# The longest T whose --check estimate fits 4 GB, by bisection over multiples of 64 (--check
# reads the data files' headers: random tokens).
DATA=$(mktemp -d /tmp/trident-bench-attention.XXXXXX)
trap 'rm -rf "$DATA"' EXIT
/usr/bin/python3 scripts/random-tokens "$DATA" 1024 300000 30000
fits() {  # fits T OVERRIDES...
  local T=$1
  shift
  "$BIN" train inputs/default.deck --model.seq_len="$T" --memory.budget_gb=4 --train.eval_tokens="$T" \
    --data.train="$DATA/train.bin" --data.val="$DATA/val.bin" --check "$@" 2>&1 |
    sed -n 's/^memory_estimate_bytes: .*total=\([0-9]*\).*/\1/p' | awk '{ exit !($1 <= 4e9) }'
}
longest() {
  local low=1 high=4096  # in units of 64 tokens
  while ! fits $((high * 64)) "$@"; do high=$((high / 2)); done
  low=$high high=$((high * 2))
  while fits $((high * 64)) "$@"; do low=$high high=$((high * 2)); done
  while ((high - low > 1)); do
    local mid=$(((low + high) / 2))
    if fits $((mid * 64)) "$@"; then low=$mid; else high=$mid; fi
  done
  echo $((low * 64))
}
t_before=$(longest "${before[@]}") t_after=$(longest)
echo "Longest context in memory.budget_gb = 4, one rank, inputs/default.deck's width (estimate):"
echo "  materialized attention, whole logits: T = $t_before"
echo "  flash attention, chunked classifier:  T = $t_after ($(echo "scale=1; $t_after / $t_before" | bc -l)x; target >= 4x)"

# The same losses: both ways trained from the same initialization on the same random tokens.
LOSS_STEPS=${BENCH_LOSS_STEPS:-0}
((LOSS_STEPS > 0)) || exit 0
/usr/bin/python3 scripts/random-tokens "$DATA" 50257 $((2 * LOSS_STEPS * B * 1024)) 4096
for path in before after; do
  extra=()
  [[ $path == before ]] && extra=("${before[@]}")
  "$BIN" train inputs/bench-124m.deck --train.steps="$LOSS_STEPS" --train.micro_batch="$B" --train.global_batch="$B" \
    --train.eval_tokens=1024 --metrics.log_interval=1 --checkpoint.at_end=false --data.train="$DATA/train.bin" \
    --data.val="$DATA/val.bin" --train.run_dir="$DATA/$path" "${extra[@]}" > "$DATA/$path.log" 2>&1 ||
    { echo "the $path run failed: $(tail -n 1 "$DATA/$path.log")" >&2; exit 1; }
done
/usr/bin/python3 - "$DATA" "$LOSS_STEPS" "$B" <<'PY'
import sys
import h5py, numpy as np
data, steps, batch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def run(path):
    with h5py.File(f"{data}/{path}/metrics.h5", "r") as f:
        return f["loss"][:], np.median(f["step_ms"][:]), max(f["memory/activations_peak_bytes"][:]) / 2**20
(l0, ms0, a0), (l1, ms1, a1) = run("before"), run("after")
worst = np.abs(l1 - l0) / np.abs(l0)
print(f"GPT-2 124M, fp32, {batch} x 1024 tokens, {steps} steps each way from the same initialization:")
print(f"  losses: largest relative difference {worst.max():.2e} (step {worst.argmax() + 1}; target <= 1e-5); "
      f"last loss {l0[-1]:.6f} / {l1[-1]:.6f}")
print(f"  median step {ms0:.0f} -> {ms1:.0f} ms ({100 * (ms1 / ms0 - 1):+.1f}%); "
      f"activations {a0:.0f} -> {a1:.0f} MiB ({100 * (a1 / a0 - 1):+.1f}%)")
PY
