#!/usr/bin/env bash
# The cuda-emu group of tests/run.sh (make test-cuda-emu; BUILD=build-cuda-emu, made with
# CUDA_EMU=1): the CUDA backend run on the CUDA emulator (tests/cuda_emu/README.md).
#   1. The emulator's own checks (selftest): what it must catch — a race between threads that a
#      barrier would order, a barrier in divergent code, a read of shared memory before any write —
#      and what it must do as CUDA does (shuffles, half-warp masks, wmma, graphs).
#   2. Every kernel check of tests/gpu (gpu_tests) against the CPU backend, with a block's threads
#      and a grid's blocks in their order and again in the reverse order.
#   3. Training runs of the CUDA backend against the same runs on the CPU backend: losses of every
#      step within the tolerance gpu-check.sh's pairs use (f32 1e-4, 16-bit 2e-2), graphs, several
#      ranks sharing the device over MPI, the Llama family, ZeRO-3, context parallelism.
. tests/e2e/lib.sh
BIN="$ROOT/$BUILD"
if [[ ! -x $BIN/tests/cuda_emu_selftest || ! -x $BIN/tests/gpu_tests ]]; then
  skip cuda_emu "$BUILD is not a CUDA_EMU=1 build (make test-cuda-emu makes one)"
  exit 0
fi
export OMP_NUM_THREADS=1 TRIDENT_TRY_CUDA_TRAINER=1 TRIDENT_GPU_PEAK_SIZE=64
cd "$WORK" || exit 1

# 1. The emulator.
"$BIN/tests/cuda_emu_selftest" 2> selftest.err

# 2. The kernels, in both orders.
for order in forward reverse; do
  TRIDENT_CUDA_EMU_ORDER=$order timeout 900 "$BIN/tests/gpu_tests" > "kernels_$order.out" 2> "kernels_$order.err"
  sed -E "s/^(PASS|FAIL|SKIP) cuda_([^ ]*)/\1 emu_${order}_\2/" "kernels_$order.out"
  grep -q "^cuda_emu:" "kernels_$order.err" && grep "^cuda_emu:" "kernels_$order.err" | head -5
done

# 3. Training, CUDA against CPU: the small model of the device tests, 4 steps of 4 sequences
# (4 micro-batches of 1), evaluated at step 4.
write_device_deck a.deck
STEPS="--train.steps=4 --train.global_batch=4 --train.eval_interval=4"
pair() {  # pair NAME RANKS TOLERANCE OVERRIDES... [-- CUDA-ONLY OVERRIDES...]
  local name=$1 ranks=$2 tolerance=$3 both=() cuda=()
  shift 3
  while (($#)) && [[ $1 != -- ]]; do both+=("$1"); shift; done
  (($#)) && shift && cuda=("$@")
  # shellcheck disable=SC2086
  train_run "${name}_cpu" "$ranks" $STEPS "${both[@]}"
  # shellcheck disable=SC2086
  train_run "${name}_cuda" "$ranks" $STEPS "${both[@]}" --kernels.device=cuda "${cuda[@]}"
  same_losses "pair_$name" "${name}_cpu" "${name}_cuda" "$tolerance"
}
pair fp32 1 1e-4
pair bf16 1 2e-2 --optim.precision=bf16
pair fp16 1 2e-2 --optim.precision=fp16
pair fp32_graphs 1 1e-4 -- --cuda.graphs=true
pair bf16_materialized 1 2e-2 --optim.precision=bf16 --model.attention=materialized
pair bf16_recompute_full 1 2e-2 --optim.precision=bf16 --memory.recompute=full
pair llama_fp32 1 1e-4 --model.arch=llama --model.kv_heads=2
pair llama_bf16 1 2e-2 --model.arch=llama --model.kv_heads=2 --optim.precision=bf16
pair tensor2 2 1e-4 --parallel.tensor=2 --comm.backend=mpi
pair tensor2_sp_bf16 2 2e-2 --parallel.tensor=2 --parallel.sequence_parallel=true --comm.backend=mpi --optim.precision=bf16
pair pipeline2_bf16_graphs 2 2e-2 --parallel.pipeline=2 --comm.backend=mpi --optim.precision=bf16 -- --cuda.graphs=true
pair pipeline2_zb_h1_bf16 2 2e-2 --parallel.pipeline=2 --parallel.schedule=zb-h1 --comm.backend=mpi --optim.precision=bf16
pair data2_zero3 2 1e-4 --parallel.data=2 --comm.backend=mpi --optim.zero=3
pair context2_bf16 2 2e-2 --parallel.context=2 --comm.backend=mpi --optim.precision=bf16
