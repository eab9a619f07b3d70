#!/usr/bin/env bash
# tier: long
# The trainer on a device, on a machine without one: kernels.device = guard runs the CPU's kernels
# on memory that host code may not touch outside a kernel (kernels/guard/backend.cpp), so every
# path by which the trainer reads or writes the model — initialisation, the data-parallel,
# tensor and pipeline communication (staged through host memory for comm.backend = mpi),
# evaluation, checkpoints written and resumed, a pipeline move, the NaN fault hook — is shown to
# go through the backend, as on a GPU. The arithmetic is the CPU's, so each run equals the same
# run on kernels.device = cpu bit for bit; a stray host access exits with the guard's report.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
write_device_deck g.deck

# same NAME: NAME_cpu and NAME_guard are the same run, bit for bit.
same() {
  if same_bits "$1_cpu" "$1_guard"; then pass "$1"; else fail "$1" "the guard run differs from the CPU run"; fi
}

# pair NAME RANKS OVERRIDES...: the run on both backends, compared.
pair() {
  local name=$1 ranks=$2 device
  shift 2
  for device in cpu guard; do
    if ! mpirun -np "$ranks" "$TRIDENT" train g.deck --train.run_dir="${name}_$device" --kernels.device=$device "$@" \
         > "${name}_$device.out" 2>&1; then
      fail "$name" "the $device run failed: $(grep -m1 -E 'error|guard' "${name}_$device.out")"
      return
    fi
  done
  same "$name"
}

pair serial_fp32 1
pair serial_bf16_async_checkpoints 1 --optim.precision=bf16 --checkpoint.full_interval=3steps --checkpoint.async=true
pair tensor2 2 --parallel.tensor=2
pair pipeline2_gpipe 2 --parallel.pipeline=2 --parallel.schedule=gpipe
pair pipeline2_zb_h1_whole_classifier 2 --parallel.pipeline=2 --parallel.schedule=zb-h1 --model.classifier_chunk=0
pair data2_zero1 2 --parallel.data=2 --optim.zero=1
pair data2_overlap 2 --parallel.data=2 --comm.overlap=true
# The reduction's time with overlap on a device: the marks around each bucket on the communication
# stream (the host clock on the guard), every step's positive and within its step.
if $PY - data2_overlap_guard <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1] + "/metrics.h5", "r")
comm, steps = f["comm_ms"][:], f["step_ms"][:]
sys.exit(0 if len(comm) == 8 and all(comm > 0) and all(comm <= steps) else 1)
PY
then pass data2_overlap_comm_ms_on_the_stream; else fail data2_overlap_comm_ms_on_the_stream "comm_ms not positive every step"; fi
pair t2p2_bf16 4 --parallel.tensor=2 --parallel.pipeline=2 --optim.precision=bf16
pair nan_step_skipped 2 --parallel.data=2 --debug.nan_steps=3
# Sequence parallelism: the all-gathers and reduce-scatters of the tensor group through the backend.
pair t2p2_sequence_parallel_bf16 4 --parallel.tensor=2 --parallel.pipeline=2 --parallel.sequence_parallel=true \
  --optim.precision=bf16
pair t2_sequence_parallel_whole_classifier 2 --parallel.tensor=2 --parallel.sequence_parallel=true \
  --model.classifier_chunk=0
pair t2_sequence_parallel_overlap_bf16 2 --parallel.tensor=2 --parallel.sequence_parallel=true \
  --parallel.tp_comm_overlap=true --optim.precision=bf16
# Context parallelism: the ring's sends, receives and block kernels through the backend.
pair c2p2_context_bf16 4 --parallel.context=2 --parallel.pipeline=2 --optim.precision=bf16

# A checkpoint written on the guard resumes on the CPU, and the reverse: the resumed steps and
# the final parameters equal the uninterrupted CPU run's WHOLE (resumed from the first run's step
# 4). Two data replicas: the second writes nothing, and takes no host copy of the state.
crossed() {  # crossed NAME FIRST_DEVICE SECOND_DEVICE WHOLE LAYOUT...
  local name=$1 first=$2 second=$3 whole=$4
  shift 4
  mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir="${name}_first" "$@" --kernels.device="$first" \
    --checkpoint.full_interval=4steps > "$name.first.out" 2>&1 &&
  mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir="$name" "$@" --kernels.device="$second" \
    --checkpoint.resume="${name}_first/checkpoints/step-00000004.full.h5" > "$name.out" 2>&1 ||
    { fail "$name" "a run failed: $(tail -2 "$name".*out)"; return; }
  if $PY - "$name" "$whole" <<'PY'
import sys, h5py
a, b = (h5py.File(d + "/metrics.h5", "r") for d in sys.argv[1:])
loss_of = {int(s): l for s, l in zip(b["step"][:], b["loss"][:])}
resumed = [(int(s), l) for s, l in zip(a["step"][:], a["loss"][:]) if s > 4]
same = len(resumed) == 4 and all(loss_of[s] == l for s, l in resumed)
same = same and open(sys.argv[1] + "/model.bin", "rb").read() == open(sys.argv[2] + "/model.bin", "rb").read()
sys.exit(0 if same else 1)
PY
  then pass "$name"; else fail "$name" "the resumed run differs from the uninterrupted one"; fi
}
mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir=whole_cpu --parallel.pipeline=2 > whole_cpu.out 2>&1
crossed checkpoint_guard_to_cpu guard cpu whole_cpu --parallel.pipeline=2
crossed checkpoint_cpu_to_guard cpu guard whole_cpu --parallel.pipeline=2
mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir=whole_data2_cpu --parallel.data=2 > whole_data2_cpu.out 2>&1
crossed checkpoint_data2_guard_to_cpu guard cpu whole_data2_cpu --parallel.data=2

# A pipeline move (balance.pipeline, a stage slowed 4x) on the guard: the state goes out through
# host memory and back into the new split; the losses stay the static run's (within 1e-5).
mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir=moved --parallel.pipeline=2 --model.layers=4 --train.steps=16 \
  --kernels.device=guard --balance.interval=2 --balance.pipeline=true --debug.slowdown=1:4 > moved.out 2>&1
mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir=static --parallel.pipeline=2 --model.layers=4 --train.steps=16 \
  > static.out 2>&1
if grep -q "balance: moved blocks" moved.out && $PY - moved static <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(d + "/metrics.h5", "r")["loss"][:] for d in sys.argv[1:])
sys.exit(0 if len(a) == len(b) and np.max(np.abs(a - b) / np.abs(b)) < 1e-5 else 1)
PY
then pass pipeline_move_on_guard; else fail pipeline_move_on_guard "no move, or losses differ: $(grep -m2 -E 'balance|error|guard' moved.out)"; fi


# The other commands that build a model: export writes it, generate decodes from it (its key/value
# cache on the device too), eval computes the validation loss — the same on both backends.
for device in cpu guard; do
  "$TRIDENT" export g.deck "export_$device.bin" --kernels.device=$device > "export_$device.out" 2>&1
  "$TRIDENT" generate g.deck --model.init=serial_fp32_cpu/model.bin --prompt="This License" --tokens=20 \
    --temperature=0 --kernels.device=$device > "generate_$device.txt" 2> "generate_$device.err"
  "$TRIDENT" eval g.deck --model.init=serial_fp32_cpu/model.bin --kernels.device=$device > "eval_$device.out" 2>&1
done
if [[ -s export_cpu.bin ]] && cmp -s export_cpu.bin export_guard.bin; then pass export_on_guard
else fail export_on_guard "$(tail -1 export_guard.out)"; fi
if [[ -s generate_cpu.txt ]] && cmp -s generate_cpu.txt generate_guard.txt; then pass generate_on_guard
else fail generate_on_guard "$(tail -1 generate_guard.err)"; fi
if grep -q "val_loss" eval_cpu.out && diff <(grep val_loss eval_cpu.out) <(grep val_loss eval_guard.out) > /dev/null
then pass "eval_on_guard ($(grep -m1 -o 'val_loss [0-9.]*' eval_guard.out))"; else fail eval_on_guard "$(tail -1 eval_guard.out)"; fi
# trident bench's step runner and GEMM passes (f32 and bf16) on the device's memory.
if "$TRIDENT" bench g.deck --kernels.device=guard --steps=2 --warmup=1 > bench_guard.out 2>&1 &&
   "$TRIDENT" bench g.deck --kernels.device=guard --bf16 --steps=2 --warmup=1 >> bench_guard.out 2>&1 &&
   grep -q "^step .*tokens_per_s=" bench_guard.out; then pass bench_on_guard
else fail bench_on_guard "$(grep -m1 -E 'error' bench_guard.out)"; fi

# The memory model against the device's memory (kernels.guard_memory_gb emulates a device of
# that size, shared by the host's ranks as a GPU would be): a run that does not fit is refused
# before its first buffer, naming the device; one that fits runs.
expect_user_error device_memory_refused "the 2 ranks on device guard:0 of host|more than its|of device memory" \
  mpirun -np 2 "$TRIDENT" train "$WORK/g.deck" --parallel.data=2 --kernels.device=guard --kernels.guard_memory_gb=0.0002
if mpirun -np 2 "$TRIDENT" train g.deck --train.run_dir=fits --parallel.data=2 --kernels.device=guard \
     --kernels.guard_memory_gb=1 --train.steps=2 > fits.out 2>&1; then pass device_memory_fits
else fail device_memory_fits "$(grep -m1 error fits.out)"; fi
# An asynchronous checkpoint's staging copies are pinned host memory, not the device's: a device
# as large as the estimate less half of them fits the run; less than the rest of it does not.
estimate=$("$TRIDENT" train g.deck --kernels.device=guard --checkpoint.async=true --check 2>&1 | sed -n 's/^memory_estimate_bytes: //p')
total=$(echo "$estimate" | grep -o 'total=[0-9]*' | cut -d= -f2) staging=$(echo "$estimate" | grep -o 'checkpoint=[0-9]*' | cut -d= -f2)
if [[ -n $total && ${staging:-0} -gt 0 ]] &&
   "$TRIDENT" train g.deck --kernels.device=guard --checkpoint.async=true --check \
     --kernels.guard_memory_gb="$(echo "($total - $staging / 2) / 10^9" | bc -l)" > staging.out 2>&1; then
  pass "device_memory_leaves_pinned_staging_out ($staging of $total bytes)"
else
  fail device_memory_leaves_pinned_staging_out "estimate '$estimate': $(grep -m1 error staging.out)"
fi
expect_user_error device_memory_without_staging "of device memory" "$TRIDENT" train "$WORK/g.deck" --kernels.device=guard \
  --checkpoint.async=true --check --kernels.guard_memory_gb="$(echo "($total - $staging - 1000) / 10^9" | bc -l)"
# trident export holds the parameters in host memory and nothing on the device: a device too small
# for the model does not stop it.
if "$TRIDENT" export g.deck export_small_device.bin --kernels.device=guard --kernels.guard_memory_gb=0.0002 \
     > export_small_device.out 2>&1 && cmp -s export_small_device.bin export_cpu.bin; then
  pass export_needs_no_device_memory
else
  fail export_needs_no_device_memory "$(tail -1 export_small_device.out)"
fi
# The doctor's default budget is that device's memory shared by its ranks, as the run recorded.
"$TRIDENT" doctor fits > doctor_fits.out 2>&1
if grep -q "memory: peak tracked memory .* of the 476.8 MiB budget (the memory of device guard:0 of host .* / 2 ranks)" doctor_fits.out
then pass doctor_uses_device_memory; else fail doctor_uses_device_memory "$(grep -m1 'memory' doctor_fits.out)"; fi
expect_user_error guard_memory_without_guard "kernels.guard_memory_gb = 1|set kernels.device = guard" \
  "$TRIDENT" train "$WORK/g.deck" --kernels.guard_memory_gb=1

# Host round trips per step (issue 30, item 4): the guard counts each device result the host
# reads (download, sum, sums_of_squares), metrics.h5's host_reads, the most of any rank. A step
# decides on the device — the loss from the micro-batches' kept sums, the gradient norm, the clip
# factor and the skip flag (kernels::StepScalar), AdamW reading the last two where they are — so
# the host reads once per step: the step's scalars at its end (it was 17 before issue 32, then
# 2). One rank with and without cuda.graphs, and a (2,2,2) layout: comm.backend = mpi stages
# device buffers through host memory to send them (kernels::stage_download, transport that NCCL
# does device to device), which is not a read.
host_reads() {  # host_reads RUN: the per-step counts, space-separated
  $PY -c "import h5py, sys; print(*h5py.File(sys.argv[1] + '/metrics.h5', 'r')['host_reads'][:])" "$1" 2> /dev/null
}
one_read_per_step() {  # one_read_per_step NAME RANKS OVERRIDES...
  local name=$1 ranks=$2
  shift 2
  mpirun -np "$ranks" "$TRIDENT" train g.deck --train.run_dir="$name" --kernels.device=guard "$@" > "$name.out" 2>&1
  local counts
  counts=$(host_reads "$name")
  if [[ -n $counts && $(tr ' ' '\n' <<<"$counts" | sort -u) == 1 ]]; then pass "$name (per step: $counts)"
  else fail "$name" "host reads per step: ${counts:-none recorded}"; fi
}
one_read_per_step host_reads_graphs_false 1 --cuda.graphs=false
one_read_per_step host_reads_graphs_true 1 --cuda.graphs=true
one_read_per_step host_reads_t2p2d2 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1
one_read_per_step host_reads_p2_interleaved 2 --parallel.pipeline=2 --parallel.virtual_stages=2 --model.layers=4
one_read_per_step host_reads_p2d2_zb_h1 4 --parallel.pipeline=2 --parallel.data=2 --parallel.schedule=zb-h1
if [[ -z $(host_reads serial_fp32_cpu) ]]; then pass host_reads_only_where_counted
else fail host_reads_only_where_counted "the CPU run recorded host_reads"; fi
