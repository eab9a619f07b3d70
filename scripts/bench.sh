#!/usr/bin/env bash
# bench.sh — `make bench`: training-step throughput of bench-s on one rank with 1 and 2 threads,
# measured in the same run as (a) the GEMM library's f32 throughput on the model's own GEMM
# shapes and (b) an independent PyTorch implementation at its best thread settings.
# Prints one table; docs/PERFORMANCE.md records the figures.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
DECK=inputs/bench-s.deck
STEPS=${BENCH_STEPS:-5}
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
json() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

printf '%-8s %12s %12s %12s %10s %14s %12s\n' threads "ours tok/s" "ours GFLOP/s" "sgemm GFLOP/s" "of sgemm" "torch tok/s" "ours/torch"
for threads in 1 2; do
  gemm=$(OMP_NUM_THREADS=$threads "$BIN" bench "$DECK" --gemm --steps="$STEPS" | field gflops)
  line=$(OMP_NUM_THREADS=$threads "$BIN" bench "$DECK" --steps="$STEPS")
  ours_tps=$(echo "$line" | field tokens_per_s)
  ours_gflops=$(echo "$line" | field gflops)
  torch=$(/usr/bin/python3 scripts/torch_gpt2.py bench --threads "$threads" --steps "$STEPS" --warmup 2)
  torch_tps=$(echo "$torch" | json tokens_per_s)
  printf '%-8s %12.0f %12.1f %12.1f %9.0f%% %14.0f %11.2fx\n' "$threads" "$ours_tps" "$ours_gflops" "$gemm" \
    "$(echo "100 * $ours_gflops / $gemm" | bc -l)" "$torch_tps" "$(echo "$ours_tps / $torch_tps" | bc -l)"
done
echo "torch settings: see '# ...' lines of scripts/torch_gpt2.py bench; FLOPs per token: docs/PERFORMANCE.md"
