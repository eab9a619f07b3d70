#!/usr/bin/env bash
# The cuda-emu group of tests/run.sh (make test-cuda-emu; BUILD=build-cuda-emu, made with
# CUDA_EMU=1): the CUDA backend run on the CUDA emulator (tests/cuda_emu/README.md).
#   1. The emulator's own checks (selftest): what it must catch — a race between threads that a
#      barrier would order, a barrier in divergent code, a read of shared memory before any write —
#      and what it must do as CUDA does (shuffles, half-warp masks, wmma, graphs).
#   2. Every kernel check of tests/gpu (gpu_tests) against the CPU backend, with a block's threads
#      and a grid's blocks in their order and again in the reverse order.
#   3. Training runs of the CUDA backend against the same runs on the CPU backend: losses of every
#      step within f32 1e-5, 16-bit 3e-4 (gpu-check.sh's pairs, on a GPU: 1e-4, 2e-2), graphs, the
#      variants gpu-check times at GPT-2's size (GELU epilogues off, f32 attention products, whole
#      logits), several ranks sharing the device over MPI, the Llama family, ZeRO-3, context
#      parallelism, the reducer's and the tensor group's overlapped communication.
#   4. A restart from a checkpoint written on the CUDA backend, bit for bit.
#   5. trident generate (the KV cache's decode attention) and eval on CUDA against the CPU.
#   6. Deferred streams: every stream's work held until it is needed, the kernels and the runs
#      that use several streams again, where a missing wait between streams shows.
#   7. The NCCL communicator on the emulator's NCCL, each rank with a GPU of its own: its own
#      checks (tests/gpu/test_nccl.sh, the watchdog's too) and training with comm.backend = nccl,
#      in the streams' order and with their work held.
. tests/e2e/lib.sh
BIN="$ROOT/$BUILD"
if [[ ! -x $BIN/tests/cuda_emu_selftest || ! -x $BIN/tests/gpu_tests ]]; then
  skip cuda_emu "$BUILD is not a CUDA_EMU=1 build (make test-cuda-emu makes one)"
  exit 0
fi
export OMP_NUM_THREADS=1 TRIDENT_TRY_CUDA_TRAINER=1 TRIDENT_GPU_PEAK_SIZE=64
cd "$WORK" || exit 1

# 1. The emulator. A misaligned vector read ends the process, as it faults on a GPU.
"$BIN/tests/cuda_emu_selftest" 2> selftest.err
"$BIN/tests/cuda_emu_selftest" misaligned > misaligned.out 2>&1
if grep -q 'misaligned address' misaligned.out; then pass emu_selftest_misaligned_vector
else fail emu_selftest_misaligned_vector "a float4 read at a misaligned address went unnoticed: $(tail -c 300 misaligned.out)"; fi

# 2. The kernels, in both orders, and with every stream's work held until it is needed.
for order in forward reverse deferred; do
  if [[ $order == deferred ]]; then mode=(TRIDENT_CUDA_EMU_STREAMS=deferred); else mode=(TRIDENT_CUDA_EMU_ORDER=$order); fi
  env "${mode[@]}" timeout 900 "$BIN/tests/gpu_tests" > "kernels_$order.out" 2> "kernels_$order.err"
  status=$?
  sed -E "s/^(PASS|FAIL|SKIP) cuda_([^ ]*)/\1 emu_${order}_\2/" "kernels_$order.out"
  grep "^cuda_emu:" "kernels_$order.err" | head -5  # the emulator's own reports (deadlocks, bad launches)
  # An end before every check reported (a sanitizer's, a crash's, the timeout's) fails too.
  if [[ $status != 0 ]] && ! grep -q '^FAIL' "kernels_$order.out"; then
    fail "emu_${order}_kernels" "gpu_tests ended with status $status after $(grep -c '^PASS' "kernels_$order.out") checks: $(grep -m3 -E 'ERROR|runtime error|SUMMARY' "kernels_$order.err" | tr '\n' ' ')"
  fi
done

# 3. Training, CUDA against CPU: the small model of the device tests, 4 steps of 2 sequences
# (2 micro-batches of 1), evaluated at step 4 on 8 sequences.
write_device_deck a.deck
STEPS="--train.steps=4 --train.global_batch=2 --train.eval_interval=4 --train.eval_tokens=256"
# The pairs' tolerances (relative, every step's loss): the emulator computes what the CPU backend
# computes, in its own order — measured here f32 ≤ 1.7e-7 and bf16 / fp16 ≤ 2.4e-5, with AVX-512
# and with DNNL_MAX_CPU_ISA=AVX2 — so far below a GPU's (gpu-check.sh: 1e-4, 2e-2), where a result
# read before it arrives shows: without the NCCL receive's stream wait (EventWork::let_go) the
# pipeline, context and tensor-overlap pairs differ by 7.7e-4 to 1.2e-2.
F32=1e-5 LOW16=3e-4
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
pair fp32 1 $F32
pair bf16 1 $LOW16 --optim.precision=bf16
pair fp16 1 $LOW16 --optim.precision=fp16
pair fp32_graphs 1 $F32 -- --cuda.graphs=true
pair bf16_materialized 1 $LOW16 --optim.precision=bf16 --model.attention=materialized
pair bf16_recompute_full 1 $LOW16 --optim.precision=bf16 --memory.recompute=full
# What gpu-check measures at GPT-2 124M's size beside the defaults, small: the GEMMs' GELU not in
# their epilogues, the flash attention's products in f32 (the warp kernels on 16-bit values), the
# whole logits at once.
pair bf16_unfused_gelu 1 $LOW16 --optim.precision=bf16 -- --cuda.gelu_epilogues=off
pair bf16_f32_attention_products 1 $LOW16 --optim.precision=bf16 -- --cuda.attention_products=f32
pair bf16_whole_logits 1 $LOW16 --optim.precision=bf16 --model.classifier_chunk=0
pair llama_fp32 1 $F32 --model.arch=llama --model.kv_heads=2
pair llama_bf16 1 $LOW16 --model.arch=llama --model.kv_heads=2 --optim.precision=bf16
pair tensor2 2 $F32 --parallel.tensor=2 --comm.backend=mpi
pair tensor2_sp_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --comm.backend=mpi --optim.precision=bf16
pair pipeline2_bf16_graphs 2 $LOW16 --parallel.pipeline=2 --comm.backend=mpi --optim.precision=bf16 -- --cuda.graphs=true
pair pipeline2_zb_h1_bf16 2 $LOW16 --parallel.pipeline=2 --parallel.schedule=zb-h1 --comm.backend=mpi --optim.precision=bf16
pair data2_zero3 2 $F32 --parallel.data=2 --comm.backend=mpi --optim.zero=3
pair context2_bf16 2 $LOW16 --parallel.context=2 --comm.backend=mpi --optim.precision=bf16
# The reducer's thread launches the gradient buckets' work beside the model's; the tensor group's
# overlapped communication runs on a stream of its own.
pair data2_overlap 2 $F32 --parallel.data=2 --comm.overlap=true
pair tensor2_sp_overlap_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --comm.backend=mpi --optim.precision=bf16

# 4. A restart on the CUDA backend from its own checkpoint at step 2 equals the uninterrupted run
# bit for bit: its per-step losses, validation losses, gradient norms and final parameters.
# shellcheck disable=SC2086
train_run resume_whole 1 $STEPS --kernels.device=cuda --optim.precision=bf16 --checkpoint.full_interval=2steps
# shellcheck disable=SC2086
train_run resume_rest 1 $STEPS --kernels.device=cuda --optim.precision=bf16 \
  --checkpoint.resume=resume_whole/checkpoints/step-00000002.full.h5
/usr/bin/python3 - resume_whole resume_rest > resume.cmp 2>&1 <<'PY'
import sys, h5py
whole, rest = (h5py.File(d + "/metrics.h5", "r") for d in sys.argv[1:])
def after(f, key):
    return {int(s): v.tobytes() for s, v in zip(f["step"][:], f[key][:]) if s > 2}
same = all(after(whole, k) == after(rest, k) and after(rest, k) for k in ("loss", "grad_norm"))
same = same and whole["val_loss"][-1].tobytes() == rest["val_loss"][-1].tobytes()
same = same and open(sys.argv[1] + "/model.bin", "rb").read() == open(sys.argv[2] + "/model.bin", "rb").read()
print(f"steps {sorted(after(rest, 'loss'))} of the restart against the uninterrupted run: " + ("equal bit for bit" if same else "they differ"))
sys.exit(0 if same else 1)
PY
if [[ $? == 0 ]]; then pass "resume_bf16 ($(cat resume.cmp))"; else fail resume_bf16 "$(tail -3 resume.cmp)"; fi

# 5. Generation (the prompt's forward and the decode attention over the KV cache) and evaluation
# on the CUDA backend, from the fp32 pair's CPU-trained model, against the CPU backend: the same
# greedy text, and validation losses within 1e-5.
for device in cpu cuda; do
  timeout 300 "$TRIDENT" generate a.deck --model.init=fp32_cpu/model.bin --prompt="This License" --tokens=16 \
    --temperature=0 --kernels.device=$device > "generate_$device.txt" 2> "generate_$device.err"
  timeout 300 "$TRIDENT" eval a.deck --model.init=fp32_cpu/model.bin --train.eval_tokens=512 \
    --kernels.device=$device > "eval_$device.out" 2>&1
done
if [[ -s generate_cpu.txt ]] && cmp -s generate_cpu.txt generate_cuda.txt; then
  pass "generate ($(wc -c < generate_cuda.txt) bytes of greedy text, the CPU backend's)"
else
  fail generate "the texts differ or a run failed: $(tail -1 generate_cuda.err)"
fi
same_loss eval eval_cuda.out eval_cpu.out "on the CPU backend:"

# 6. Deferred streams (TRIDENT_CUDA_EMU_STREAMS=deferred, tests/cuda_emu/README.md): each stream's
# work held until something needs it, so a stream that reads what another writes without an
# event between them reads it unwritten. First that the emulator shows a missing wait and keeps
# an event's order, then the runs that use several streams — graphs (a blocking stream beside the
# legacy one), the reducer's communication stream, the tensor group's, ZeRO-3's gathers,
# pipeline and context parallelism — against the CPU again.
TRIDENT_CUDA_EMU_STREAMS=deferred "$BIN/tests/cuda_emu_selftest" 2> selftest_deferred.err | grep deferred_
export TRIDENT_CUDA_EMU_STREAMS=deferred
pair deferred_fp32_graphs 1 $F32 -- --cuda.graphs=true
pair deferred_data2_overlap 2 $F32 --parallel.data=2 --comm.overlap=true
pair deferred_data2_zero3 2 $F32 --parallel.data=2 --comm.backend=mpi --optim.zero=3
pair deferred_tensor2_sp_overlap_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --comm.backend=mpi --optim.precision=bf16
pair deferred_pipeline2_bf16_graphs 2 $LOW16 --parallel.pipeline=2 --comm.backend=mpi --optim.precision=bf16 -- --cuda.graphs=true
pair deferred_context2_bf16 2 $LOW16 --parallel.context=2 --comm.backend=mpi --optim.precision=bf16
unset TRIDENT_CUDA_EMU_STREAMS

# 7. NCCL (comm.backend = nccl: the emulator's libnccl.so.2 over MPI, tests/cuda_emu/nccl.cpp),
# each rank with an emulated GPU of its own. An NCCL operation waits on its stream, not the host,
# for its peers, as on GPUs. First the NCCL communicator's own checks (tests/gpu/test_nccl.sh):
# every operation against the MPI communicator's on the same data, receives and ring steps left
# to the stream, the hierarchical all-reduce over nodes of two ranks, a graph, on four ranks; the
# watchdog's end of a job where a rank never joins; the checks again on two ranks with every
# stream's work held. Then training: its collectives, its point-to-point (the pipeline's, the
# context ring's, the tensor group's overlap), ZeRO-3's gathers against the CPU's runs over MPI,
# and with held streams the runs that overlap communication with computation.
test_nccl() {  # test_nccl NAME GPUS [STREAMS]
  (cd "$ROOT" && BUILD=$BUILD TRIDENT_CUDA_EMU_GPUS=$2 TRIDENT_CUDA_EMU_STREAMS=${3:-} bash tests/gpu/test_nccl.sh \
    2> "$WORK/test_nccl_$1.err") | sed -E "s/^(PASS|FAIL|SKIP) nccl_/\\1 emu_$1_nccl_/"
}
test_nccl ranks4 4
test_nccl deferred 2 deferred
export TRIDENT_CUDA_EMU_GPUS=2
pair nccl_data2 2 $F32 --parallel.data=2 -- --comm.backend=nccl
pair nccl_data2_zero3 2 $F32 --parallel.data=2 --optim.zero=3 -- --comm.backend=nccl
pair nccl_tensor2_sp_overlap_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --optim.precision=bf16 -- --comm.backend=nccl
pair nccl_pipeline2_bf16 2 $LOW16 --parallel.pipeline=2 --optim.precision=bf16 -- --comm.backend=nccl
pair nccl_context2_bf16 2 $LOW16 --parallel.context=2 --optim.precision=bf16 -- --comm.backend=nccl
export TRIDENT_CUDA_EMU_STREAMS=deferred
pair deferred_nccl_data2_overlap 2 $F32 --parallel.data=2 --comm.overlap=true -- --comm.backend=nccl
pair deferred_nccl_tensor2_sp_overlap_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --optim.precision=bf16 -- --comm.backend=nccl
pair deferred_nccl_pipeline2_bf16_graphs 2 $LOW16 --parallel.pipeline=2 --optim.precision=bf16 -- --comm.backend=nccl --cuda.graphs=true
pair deferred_nccl_context2_bf16 2 $LOW16 --parallel.context=2 --optim.precision=bf16 -- --comm.backend=nccl
# The main stream's work held, the side streams' (communication's) run at once: a collective or a
# send that reads what the model's stream has not yet written, for want of a wait, sends it unwritten.
export TRIDENT_CUDA_EMU_STREAMS=main-late
"$BIN/tests/cuda_emu_selftest" 2> selftest_main_late.err | grep main_late_
test_nccl main_late 2 main-late
pair main_late_data2_overlap 2 $F32 --parallel.data=2 --comm.overlap=true --comm.backend=mpi
pair main_late_nccl_data2_overlap 2 $F32 --parallel.data=2 --comm.overlap=true -- --comm.backend=nccl
pair main_late_nccl_data2_zero3 2 $F32 --parallel.data=2 --optim.zero=3 -- --comm.backend=nccl
pair main_late_nccl_tensor2_sp_overlap_bf16 2 $LOW16 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.tp_comm_overlap=true --optim.precision=bf16 -- --comm.backend=nccl
pair main_late_nccl_pipeline2_bf16_graphs 2 $LOW16 --parallel.pipeline=2 --optim.precision=bf16 -- --comm.backend=nccl --cuda.graphs=true
pair main_late_nccl_context2_bf16 2 $LOW16 --parallel.context=2 --optim.precision=bf16 -- --comm.backend=nccl
unset TRIDENT_CUDA_EMU_GPUS TRIDENT_CUDA_EMU_STREAMS
