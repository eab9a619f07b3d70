#!/usr/bin/env bash
# tier: long
# cuda.graphs on a machine without a GPU: the guarded backend records each micro-batch's forward
# and backward as CUDA's stream capture would (kernels/guard/backend.cpp) — the kernels with
# their arguments, nothing run — and replays the record. Each run equals the same run on the CPU
# without graphs bit for bit, which shows that a recorded forward or backward holds device work
# only and that nothing in it changes between micro-batches except what the buffers hold (the
# tokens uploaded before it, the received activations, the loss left on the device). A host
# transfer inside a record is the guard's report, exit 70. The combinations a graph cannot hold
# are deck errors.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
write_device_deck g.deck

# run_pair NAME RANKS OVERRIDES...: NAME_cpu on the CPU without graphs and NAME_graphs on the
# guard with them; fails NAME (status 1) if either run fails, and sets `replays` to the graphs
# run's count of replayed forwards and backwards.
run_pair() {
  local name=$1 ranks=$2
  shift 2
  replays=0
  mpirun -np "$ranks" "$TRIDENT" train g.deck --train.run_dir="${name}_cpu" "$@" > "${name}_cpu.out" 2>&1 &&
  mpirun -np "$ranks" "$TRIDENT" train g.deck --train.run_dir="${name}_graphs" --kernels.device=guard \
    --cuda.graphs=true "$@" > "${name}_graphs.out" 2>&1 ||
    { fail "$name" "a run failed: $(grep -h -m1 -E 'error|guard' "${name}"_*.out)"; return 1; }
  replays=$(grep -oE 'cuda.graphs: [0-9]+' "${name}_graphs.out" | grep -oE '[0-9]+$')
  replays=${replays:-0}
}

# pair NAME RANKS OVERRIDES...: the two runs have the same per-step losses, validation losses,
# gradient norms and final parameters, bit for bit, and the guard run replayed graphs.
pair() {
  run_pair "$@" || return
  if [[ $replays -gt 0 ]] && same_bits "$1_cpu" "$1_graphs"
  then pass "$1 ($replays replays)"; else fail "$1" "no replays ($replays) or the runs differ"; fi
}

pair serial_fp32 1
pair serial_bf16 1 --optim.precision=bf16
# fp16's dynamic loss scale changes the backward's scale (down twice from 1e12 on overflows, then up
# every two steps): its graphs are recorded again (a replay with the old scale would differ).
pair serial_fp16_dynamic_scale 1 --optim.precision=fp16 --optim.initial_loss_scale=1e12 --optim.loss_scale_backoff=1e-4 \
  --optim.hysteresis=1 --optim.loss_scale_window=2
pair recompute_full 1 --memory.recompute=full
pair recompute_selective_bf16 1 --memory.recompute=selective --optim.precision=bf16
pair pipeline2_1f1b 2 --parallel.pipeline=2 --train.global_batch=16
pair pipeline2_gpipe_bf16 2 --parallel.pipeline=2 --parallel.schedule=gpipe --optim.precision=bf16
pair pipeline2_interleaved_v2 2 --parallel.pipeline=2 --parallel.virtual_stages=2 --model.layers=4 --train.global_batch=16
pair pipeline2_zb_h1_bf16 2 --parallel.pipeline=2 --parallel.schedule=zb-h1 --optim.precision=bf16 --train.global_batch=16
pair data2_zero1 2 --parallel.data=2 --optim.zero=1 --comm.overlap=false
# With overlap the last backward hands blocks to the reducer as they finish: it runs as usual.
pair data2_overlap 2 --parallel.data=2 --comm.overlap=true
pair p2d2 4 --parallel.pipeline=2 --parallel.data=2 --train.global_batch=16
# balance.micro_batches changes the micro-batch count and size: the activations are
# reallocated and the graphs recorded again. The changes follow measured times, so the two runs
# may change at other steps (here 8 x 1 -> 4 x 2 always, -> 2 x 4 in some runs): the losses are
# compared within 1e-5 (what a micro-batch change keeps, balance.sh), the graphs run must have
# changed, and a replay of a record made for the old buffers would be far off.
if run_pair micro_batches_model 1 --balance.micro_batches=model --balance.interval=2 --train.steps=10; then
  if grep -q 'balance: micro-batches now' micro_batches_model_graphs.out && [[ $replays -gt 0 ]]; then
    same_losses micro_batches_model micro_batches_model_cpu micro_batches_model_graphs 1e-5
  else
    fail micro_batches_model "the graphs run changed no micro-batch count or replayed nothing ($replays replays): $(grep -m1 -E 'micro-batches' micro_batches_model_graphs.out)"
  fi
fi

# What a graph cannot hold: deck errors, exit 2, before any step.
expect_user_error graphs_on_cpu "cuda.graphs = true|the CPU backend runs each kernel as it is called" \
  "$TRIDENT" train "$WORK/g.deck" --cuda.graphs=true
expect_user_error graphs_tensor_over_mpi "parallel.tensor = 2|only as NCCL calls" \
  mpirun -np 2 "$TRIDENT" train "$WORK/g.deck" --cuda.graphs=true --kernels.device=guard --parallel.tensor=2
expect_user_error graphs_context_over_mpi "parallel.context = 2|only as NCCL calls" \
  mpirun -np 2 "$TRIDENT" train "$WORK/g.deck" --cuda.graphs=true --kernels.device=guard --parallel.context=2
expect_user_error graphs_with_pipeline_moves "balance.pipeline = true|does not measure" \
  mpirun -np 2 "$TRIDENT" train "$WORK/g.deck" --cuda.graphs=true --kernels.device=guard --parallel.pipeline=2 \
  --balance.pipeline=true

expect_user_error graphs_with_bench_ops "trident bench --ops times each kernel operation with events|cuda.graphs = true (command line)" \
  "$TRIDENT" bench "$WORK/g.deck" --ops --cuda.graphs=true --kernels.device=guard
# trident bench's step is train's: with cuda.graphs its micro-batches run from recorded graphs.
if "$TRIDENT" bench g.deck --cuda.graphs=true --kernels.device=guard --no-gemm --steps=1 --warmup=1 > bench_graphs.out 2>&1 &&
   grep -qE '^step .*tokens_per_s=.* graph_replays=[1-9]' bench_graphs.out; then pass bench_runs_the_graphed_step
else fail bench_runs_the_graphed_step "$(tail -1 bench_graphs.out)"; fi
# plan --calibrate probes this host's CPU, which records no graphs: a GPU deck's cuda.graphs is
# left out of its probe step, not a stop.
if "$TRIDENT" commbench g.deck --train.run_dir=cb > cb.out 2>&1 &&
   "$TRIDENT" plan g.deck --calibrate="$WORK/host.ini" --links=cb/links.ini --cuda.graphs=true > calibrate.out 2>&1 &&
   grep -q '^peak_tflops_fp32' "$WORK/host.ini"; then pass calibrate_with_cuda_graphs_in_the_deck
else fail calibrate_with_cuda_graphs_in_the_deck "$(tail -1 calibrate.out)"; fi
