#!/usr/bin/env bash
# bench.sh — `make bench`: training-step throughput of bench-s on one rank with 1 and 2 threads,
# measured in the same run as (a) the GEMM library's f32 throughput on the model's own GEMM
# shapes (trident bench alternates steps and GEMM passes, so both see the same machine) and
# (b) an independent PyTorch implementation at its best thread settings; then bf16 against fp32
# and against PyTorch's bf16 autocast; then our LayerNorm and GELU beside oneDNN's. The first
# table again for the Llama family (inputs/bench-llama.deck, scripts/torch_llama.py).
# docs/PERFORMANCE.md records the figures.
set -euo pipefail
. scripts/mpi-env.sh
BIN=${BIN:-build/bin/trident}
DECK=inputs/bench-s.deck
STEPS=${BENCH_STEPS:-7}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
json() { /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

# step_table DECK TORCH_SCRIPT: our step beside the GEMM rate and the PyTorch model's at its
# best thread split, at 1 and 2 threads (both PyTorch scripts take the same bench flags).
step_table() {
  local deck=$1 torch_script=$2 threads line torch tps torch_tps
  echo "$(basename "$deck" .deck): $(grep -E '^(arch|layers|heads|kv_heads|hidden|ffn_hidden|vocab|seq_len|micro_batch) ' "$deck" | tr -s ' ' | paste -sd' '), fp32, AdamW"
  printf '%-8s %11s %13s %14s %9s %12s %11s\n' threads "ours tok/s" "ours GFLOP/s" "sgemm GFLOP/s" "of sgemm" "torch tok/s" "ours/torch"
  for threads in 1 2; do
    line=$(OMP_NUM_THREADS=$threads "$BIN" bench "$deck" --steps="$STEPS")
    torch=$(/usr/bin/python3 "$torch_script" bench --threads "$threads" --steps "$STEPS" --warmup 2)
    tps=$(echo "$line" | field tokens_per_s)
    torch_tps=$(echo "$torch" | json tokens_per_s)
    printf '%-8s %11.0f %13.1f %14.1f %8.0f%% %12.0f %10.2fx\n' "$threads" "$tps" \
      "$(echo "$line" | field gflops)" "$(echo "$line" | field gemm_gflops)" \
      "$(echo "100 * $(echo "$line" | field of_gemm)" | bc -l)" "$torch_tps" "$(echo "$tps / $torch_tps" | bc -l)"
    echo "         torch best: $(echo "$torch" | json intra_op_threads) intra-op thread(s), OpenBLAS on $(echo "$torch" | json openblas_threads)"
  done
}
step_table "$DECK" scripts/torch_gpt2.py
echo
# The Llama family (issue 35: >= 85% of the GEMM rate, >= 1.15x PyTorch): bench-s's size with
# grouped-query attention, SwiGLU and an untied head, beside an independent PyTorch Llama.
step_table inputs/bench-llama.deck scripts/torch_llama.py
echo
# Mixed precision: our bf16 and fp32 steps alternating in one process, beside PyTorch's bf16
# autocast at its best thread setting (issue target: bf16 >= 1.6x our fp32, >= 1.5x torch).
echo "bench-s in bf16 (optim.precision = bf16) beside fp32 and PyTorch's bf16 autocast"
printf '%-8s %11s %11s %13s %14s %13s\n' threads "fp32 ms" "bf16 ms" "bf16 speedup" "torch bf16 t/s" "ours/torch"
for threads in 1 2; do
  line=$(OMP_NUM_THREADS=$threads "$BIN" bench "$DECK" --compare=bf16 --steps="$STEPS")
  torch=$(/usr/bin/python3 scripts/torch_gpt2.py bench --threads "$threads" --steps "$STEPS" --warmup 2 --autocast bf16)
  torch_tps=$(echo "$torch" | json tokens_per_s)
  printf '%-8s %11.1f %11.1f %12.2fx %14.0f %12.2fx\n' "$threads" "$(echo "$line" | field fp32_step_ms)" \
    "$(echo "$line" | field bf16_step_ms)" "$(echo "$line" | field speedup)" "$torch_tps" \
    "$(echo "$(echo "$line" | field bf16_tokens_per_s) / $torch_tps" | bc -l)"
done
echo "  (the bf16 GEMMs of Debian's oneDNN 2.6 run at ~0.6-0.7x its f32 GEMMs on this CPU: trident bench $DECK --bf16)"
echo
echo "LayerNorm and GELU on bench-s shapes: our OpenMP kernels beside oneDNN's primitives (1 thread)"
OMP_NUM_THREADS=1 "$BIN" bench "$DECK" --kernels
